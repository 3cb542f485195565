"""A Quart application, served with no --interface (tests/python/test_interface.py)."""

from quart import Quart

app = Quart(__name__)


@app.get("/")
async def index():
    return "quart"
