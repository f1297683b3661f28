"""Generic supervision (OTP semantics on trio), process handling, logging and the CLI."""
