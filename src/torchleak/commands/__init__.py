"""One module per ``torchleak`` subcommand: ``configure(parser)`` and ``execute(args)``."""
