"""A FastAPI app: path and query parameters, a validated JSON body, WebSocket
routes (ws_routes.py)."""

from fastapi import FastAPI, WebSocket
from pydantic import BaseModel

import ws_routes

app = FastAPI()


class Item(BaseModel):
    name: str
    price: float


@app.get("/items/{item_id}")
async def read_item(item_id: int, q: str = ""):
    return {"item_id": item_id, "q": q}


@app.post("/items")
async def create_item(item: Item):
    return {"name": item.name, "price_with_tax": round(item.price * 1.2, 2)}


@app.websocket("/ws/echo")
async def ws_echo(websocket: WebSocket):
    await ws_routes.echo(websocket)


@app.websocket("/ws/reject")
async def ws_reject(websocket: WebSocket):
    await ws_routes.reject(websocket)


@app.websocket("/ws/deny")
async def ws_deny(websocket: WebSocket):
    await ws_routes.deny(websocket)
