"""Generic I/O for supervised trio programs: child processes in their own process group
with a parent-death signal, reading and writing pipes and sockets (lines with a size
limit, an ordered writer), and structlog set up for JSON-line log files.

Nothing here knows what the bytes mean."""
