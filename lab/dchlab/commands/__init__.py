"""One module per `dch` subcommand; each defines `register(subparsers)`.

`register` adds a parser and sets `func` (called with the parsed args, returns
the exit code).
"""
