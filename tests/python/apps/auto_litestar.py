"""A Litestar application, served with no --interface (tests/python/test_interface.py)."""

from litestar import Litestar, get


@get("/", sync_to_thread=False)
def index() -> str:
    return "litestar"


app = Litestar(route_handlers=[index])
