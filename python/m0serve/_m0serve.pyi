"""The Rust extension behind m0serve (built by maturin from src/python)."""

from typing import List

__version__: str

def main(argv: List[str]) -> int:
    """Run the command line ``argv`` (program name first); return the exit status.

    0 after a graceful shutdown (SIGTERM or SIGINT), 1 when the server failed,
    2 for a bad command line or an application that cannot be loaded. Serving
    takes over SIGINT and SIGTERM for the process.
    """
