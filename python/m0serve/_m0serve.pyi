"""The Rust extension behind m0serve (built by maturin from src/python)."""

from typing import Any, List, Optional, Tuple

__version__: str

def main(argv: List[str]) -> int:
    """Run the command line ``argv`` (program name first); return the exit status.

    0 after a graceful shutdown (SIGTERM or SIGINT), 1 when the server failed,
    2 for a bad command line or an application that cannot be loaded. Serving
    takes over SIGINT and SIGTERM for the process.
    """

def flags() -> List[Tuple[str, str]]:
    """Every long flag (without ``--``) and how it takes its value:
    ``switch``, ``toggle``, ``value`` or ``list``."""

class Server:
    """One server, served once (``m0serve.Server`` wraps it).

    ``argv`` is a command line (program name first); with ``app``, an
    application object served in this process (``name`` in messages), and
    ``argv`` names no APP. A bad command line raises ``ValueError`` here.
    """

    def __init__(self, argv: List[str], app: Optional[Any] = None, name: Optional[str] = None) -> None: ...
    def serve(self) -> int:
        """Serve until shut down; the exit status (0 after a graceful shutdown)."""
    def shutdown(self) -> None:
        """Drain and stop, as SIGTERM would; from any thread."""
    @property
    def url(self) -> Optional[str]:
        """Where it serves, once ready; None before and after."""
    def wait_ready(self, timeout: float) -> Optional[str]:
        """Its URL once ready; None if shut down or timed out first."""
