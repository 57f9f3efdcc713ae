"""torchleak's version, in a module of its own: what records it (a trace's metadata, the
CLI's ``--version``) imports this, never the package's face and the API behind it."""

__version__ = "0.2.0"
