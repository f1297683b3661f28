"""Any config document loads, or fails with the project's ConfigError naming file and key.

Documents are generated from the config model: every field of `[settings]`,
`[servers.NAME]` and `[projects.NAME]` gets a value of its own type or a wrong one, empty
and whitespace strings, NaN, infinities, negative and huge numbers, unknown keys and odd
server names. Whatever comes out, loading it is bounded in time and raises nothing but
`ConfigError` (whose every problem names its key path). The default profile is fixed
and short, for CI; `HYPOTHESIS_PROFILE=soak` explores at length.
"""

from __future__ import annotations

import math
import os
from datetime import timedelta
from pathlib import Path
from typing import Any

import attrs
import pytest
import tomli_w
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from assern.actors.config.model import ServerConfig, SettingsConfig
from assern.actors.config.resolve import resolve_config
from assern.actors.config.spec import ConfigError, ResolvedConfig

settings.register_profile(
    "ci",
    max_examples=150,
    derandomize=True,
    deadline=timedelta(seconds=2),  # loading one document is bounded in time
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
settings.register_profile(
    "soak",
    max_examples=5_000,
    deadline=timedelta(seconds=2),
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))

# -- values -------------------------------------------------------------------------------

NUMBERS = st.one_of(
    st.integers(min_value=-(2**63), max_value=2**63 - 1),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([0, -1, 1, 0.5, 1e-9, 1e308, math.nan, math.inf, -math.inf, 2**62]),
)
TEXTS = st.one_of(
    st.sampled_from(["", " ", "   ", "\t", "x", "${UNDEFINED}", "${UNDEFINED:-}", "$$", "${HOME}", "~"]),
    st.text(max_size=20),
)
URLS = st.one_of(
    TEXTS,
    st.sampled_from(
        ["http://127.0.0.1:9/mcp", "https://example.invalid/x", "not a url", "http://", "ftp://h/p"]
    ),
)
SCALARS = st.one_of(NUMBERS, TEXTS, st.booleans())
ANY = st.recursive(
    SCALARS,
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(TEXTS, inner, max_size=3)),
    max_leaves=6,
)
STRING_LISTS = st.one_of(st.lists(TEXTS, max_size=3), ANY)
STRING_TABLES = st.one_of(st.dictionaries(TEXTS, TEXTS, max_size=3), ANY)


SERVER_FIELDS = tuple(field.name for field in attrs.fields(ServerConfig))
SETTINGS_FIELDS = tuple(field.name for field in attrs.fields(SettingsConfig))
SECONDS = st.floats(min_value=0.001, max_value=100_000)
#: Values that work, by field (the rest of the time, a field gets a hostile value).
VALID: dict[str, st.SearchStrategy[Any]] = {
    "args": st.lists(st.sampled_from(["-m", "x", "${HOME}/y"]), max_size=2),
    "allowed": st.lists(st.sampled_from(["get_*", "echo"]), max_size=2),
    "env": st.dictionaries(st.sampled_from(["A", "TOKEN"]), st.sampled_from(["1", "${HOME}"]), max_size=2),
    "headers": st.dictionaries(st.sampled_from(["Authorization"]), st.just("Bearer x"), max_size=1),
    "cwd": st.sampled_from([".", "~", "/tmp"]),
    "merge_mode": st.sampled_from(["overlay", "replace"]),
    "restart": st.sampled_from(["permanent", "transient", "temporary"]),
    "max_restarts": st.integers(min_value=0, max_value=50),
    "restart_window": SECONDS,
    "backoff_initial": SECONDS,
    "backoff_max": SECONDS,
    "start": st.sampled_from(["eager", "lazy"]),
    "timeout": SECONDS,
    "startup_timeout": SECONDS,
    "idle_timeout": SECONDS,
    "protocol": st.sampled_from(["legacy", "auto", "2026-07-28"]),
    "disabled": st.booleans(),
    "naming": st.sampled_from(["prefix", "hybrid"]),
    "max_name_length": st.integers(min_value=16, max_value=200),
    "initialize_wait": st.floats(min_value=0, max_value=10),
}
#: Values that may or may not work, by field.
HOSTILE: dict[str, st.SearchStrategy[Any]] = {
    "command": st.one_of(TEXTS, st.just("${ASSERN_PYTHON}")),
    "url": URLS,
    "args": STRING_LISTS,
    "allowed": STRING_LISTS,
    "env": STRING_TABLES,
    "headers": STRING_TABLES,
    "cwd": TEXTS,
    "transport": st.sampled_from(["stdio", "sse", "streamable-http", "http", "", "STDIO"]),
    "merge_mode": st.sampled_from(["overlay", "replace", "merge", ""]),
    "restart": st.sampled_from(["permanent", "transient", "temporary", "always"]),
    "start": st.sampled_from(["eager", "lazy", "never"]),
    "protocol": st.sampled_from(["legacy", "auto", "2026-07-28", "2025-11-25", "1.0", ""]),
    "naming": st.sampled_from(["prefix", "hybrid", "flat"]),
    "disabled": st.booleans(),
}


def _field_values(name: str) -> st.SearchStrategy[Any]:
    """Values for one field: of the field's kind (working or not), or anything at all."""
    hostile = st.one_of(HOSTILE.get(name, NUMBERS), ANY)
    return st.one_of(VALID[name], hostile) if name in VALID else hostile


def _tables(fields: tuple[str, ...]) -> st.SearchStrategy[dict[str, Any]]:
    """A table of some of `fields`, sometimes with a key the model does not know."""
    known = st.fixed_dictionaries({}, optional={name: _field_values(name) for name in fields})
    return st.one_of(
        known, known, st.builds(lambda table, extra: {**table, "unknown_key": extra}, known, ANY)
    )


def _servers() -> st.SearchStrategy[dict[str, Any]]:
    """A server table that says how to reach it, plus some fields."""
    reach = st.one_of(
        st.fixed_dictionaries({"command": st.sampled_from(["${ASSERN_PYTHON}", "x", "${PYTHON:-python3}"])}),
        st.fixed_dictionaries({"url": st.sampled_from(["http://127.0.0.1:9/mcp", "https://h.invalid/m"])}),
    )
    others = tuple(name for name in SERVER_FIELDS if name not in ("command", "url", "transport"))
    working = st.fixed_dictionaries({}, optional={name: VALID[name] for name in others if name in VALID})
    return st.one_of(
        st.builds(lambda base, rest: {**rest, **base}, reach, working),
        st.builds(lambda base, rest: {**rest, **base}, reach, _tables(others)),
        _tables(SERVER_FIELDS),
    )


SERVER_NAMES = st.one_of(
    st.sampled_from(["a", "my-server", "", " ", "a/b", "a.b", "é", "x" * 80, "a b", "\t"]),
    st.text(max_size=8),
)
PROJECTS = st.fixed_dictionaries(
    {},
    optional={
        "directories": st.one_of(st.lists(st.sampled_from(["~/w/**", "/abs/*", "rel", ""]), max_size=2), ANY),
        "env": STRING_TABLES,
        "servers": st.one_of(
            st.lists(SERVER_NAMES, max_size=2),
            st.dictionaries(SERVER_NAMES, _servers(), max_size=2),
        ),
    },
)
HOSTILE_DOCUMENTS = st.fixed_dictionaries(
    {},
    optional={
        "settings": st.one_of(_tables(SETTINGS_FIELDS), ANY),
        "servers": st.one_of(st.dictionaries(SERVER_NAMES, _servers(), max_size=3), ANY),
        "projects": st.one_of(st.dictionaries(SERVER_NAMES, PROJECTS, max_size=2), ANY),
        "include": st.one_of(st.lists(TEXTS, max_size=2), ANY),
        "surprise": ANY,
    },
)
#: Documents of well-named servers whose fields may still be wrong.
PLAUSIBLE_DOCUMENTS = st.fixed_dictionaries(
    {"servers": st.dictionaries(st.sampled_from(["a", "b-2", "my server", "x.y"]), _servers(), max_size=3)},
    optional={"settings": _tables(SETTINGS_FIELDS)},
)
DOCUMENTS = st.one_of(PLAUSIBLE_DOCUMENTS, HOSTILE_DOCUMENTS)


def _toml(document: dict[str, Any]) -> str | None:
    """The document as TOML, or None when TOML cannot hold it (e.g. a null or a lone surrogate)."""
    try:
        return tomli_w.dumps(document)
    except (TypeError, ValueError, UnicodeEncodeError):
        return None


@given(document=DOCUMENTS)
def test_any_document_loads_or_says_which_key_is_wrong(tmp_path: Path, document: dict[str, Any]) -> None:
    text = _toml(document)
    if text is None:
        return
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    config = tmp_path / "config.toml"
    try:
        config.write_text(text, encoding="utf-8")
    except UnicodeEncodeError:
        return
    environ = {"HOME": str(home), "PATH": "/usr/bin:/bin", "ASSERN_PYTHON": "/usr/bin/python3"}
    try:
        resolved = resolve_config(
            config_path=config, project=None, cwd=tmp_path, environ=environ, assern_home=home / ".assern"
        )
    except ConfigError as exc:
        refused: ConfigError | None = exc
    else:
        refused = None
        assert isinstance(resolved, ResolvedConfig)
        for spec in resolved.servers.values():
            # What loads can run: finite numbers, a command or a URL to reach it by.
            assert math.isfinite(spec.timeout)
            assert math.isfinite(spec.startup_timeout)
            assert (spec.command or "").strip() or spec.url
    event("refused" if refused is not None else f"loaded {len(resolved.servers)} server(s)")
    if refused is not None:
        assert refused.file == str(config), str(refused)
        assert refused.problems
        for problem in refused.problems:
            assert " @ " in problem, f"no key path in {problem!r}"


@pytest.mark.parametrize(
    ("table", "problem"),
    [
        ('command = "${UNDEF:-}"', "expected a command to run, got '${UNDEF:-}', which is '' once expanded"),
        ('command = "   "', "expected a command to run, got '   ' @ servers.a.command"),
        ('command = "x"\ntimeout = nan', "expected a number (a finite number), got nan @ servers.a.timeout"),
        ('command = "x"\nbackoff_initial = 1e309', "got inf @ servers.a.backoff_initial"),
        ('command = "x"\nrestart_window = 1e12', "expected a number <= 604800, got 1000000000000.0"),
        (
            'url = "not a url"',
            "expected an http:// or https:// URL with a host, got 'not a url' @ servers.a.url",
        ),
        ('url = "ftp://h/p"', "URL with a host, got 'ftp://h/p'"),
    ],
)
def test_each_value_that_cannot_work_is_an_error(tmp_path: Path, table: str, problem: str) -> None:
    config = tmp_path / "config.toml"
    config.write_text(f"[servers.a]\n{table}\n")
    with pytest.raises(ConfigError) as refused:
        resolve_config(
            config_path=config,
            project=None,
            cwd=tmp_path,
            environ={"HOME": str(tmp_path)},
            assern_home=tmp_path,
        )
    assert refused.value.file == str(config)
    assert any(problem in line for line in refused.value.problems), refused.value.problems


@pytest.mark.parametrize(
    ("document", "problem"),
    [
        (
            '[servers.""]\ncommand = "x"',
            "expected a server name with at least one letter or digit, got '' @ servers.\"\"",
        ),
        ('[servers."a/b"]\ncommand = "x"', "without '/' or control characters, got 'a/b'"),
        ('[servers."_-"]\ncommand = "x"', "at least one letter or digit, got '_-'"),
        ("[settings]\nmax_name_length = 3", "expected an integer >= 16, got 3 @ settings.max_name_length"),
    ],
)
def test_names_that_cannot_name_tools_are_errors(tmp_path: Path, document: str, problem: str) -> None:
    config = tmp_path / "config.toml"
    config.write_text(document + "\n")
    with pytest.raises(ConfigError) as refused:
        resolve_config(
            config_path=config,
            project=None,
            cwd=tmp_path,
            environ={"HOME": str(tmp_path)},
            assern_home=tmp_path,
        )
    assert any(problem in line for line in refused.value.problems), refused.value.problems
