// assern's status page, live: the server sends the parts of the page that changed as
// server-sent events (one JSON object, part id -> HTML it rendered), and this puts them
// in place. Without this script the page is the same, as of its loading.
"use strict";
(function () {
  const live = document.getElementById("live");
  const say = (words, on) => {
    live.textContent = words;
    live.className = on ? "live on" : "live off";
  };
  const source = new EventSource("/events" + window.location.search);
  source.addEventListener("parts", (event) => {
    const parts = JSON.parse(event.data);
    for (const id of Object.keys(parts)) {
      const part = document.getElementById(id);
      if (part !== null) {
        part.innerHTML = parts[id];
      }
    }
    say("live", true);
  });
  source.addEventListener("error", () => {
    if (source.readyState === EventSource.CLOSED) {
      say("disconnected: run `assernctl web` to sign in again", false);
    } else {
      say("reconnecting…", false);
    }
  });
})();
