"""The ``m0serve`` console script and ``python -m m0serve``."""

import sys

from m0serve._m0serve import main as _main


def main() -> None:
    """Run m0serve with this process's command line and exit with its status."""
    # The program name is fixed so that --help reads "m0serve", not "__main__.py".
    argv = ["m0serve", *sys.argv[1:]]
    try:
        status = _main(argv)
    except KeyboardInterrupt:
        # Ctrl-C while the application was still being imported, before the
        # server took SIGINT over: stop quietly, as the shell expects.
        status = 130
    sys.exit(status)


if __name__ == "__main__":
    main()
