"""A tiny calculator: a second demo MCP server to play with through assern.

- tools    add(a, b), multiply(a, b), sqrt(x)
- prompts  explain-calculation(expression)

Each tool answers with the number as text and, for clients that read
structured results, as `{"result": <number>}`. `sqrt` of a negative number is
an error result (`isError: true`) that the model can read and correct, not a
protocol error.

Run it on its own (it speaks MCP over stdin/stdout, so it waits for a client):

    python -m assern.examples.calc_server

or let assern start it from the default configuration (`examples/default.toml`),
where its tools appear as `calc_add`, `calc_multiply` and `calc_sqrt`.
"""

from __future__ import annotations

import math
from typing import Annotated

import anyio
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import Field

mcp = MCPServer(
    "calc",
    version="1.0.0",
    instructions="Exact arithmetic for when the model should not do sums in its head.",
)

Number = Annotated[float, Field(description="Any real number.")]


@mcp.tool(description="Add two numbers: a + b.")
def add(a: Number, b: Number) -> float:
    return a + b


@mcp.tool(description="Multiply two numbers: a × b.")
def multiply(a: Number, b: Number) -> float:
    return a * b


@mcp.tool(description="Square root of x.\n\nFails for negative numbers: there is no real root.")
def sqrt(x: Annotated[float, Field(description="A number ≥ 0.")]) -> float:
    if x < 0:
        # A ToolError becomes a result with isError: true and this text.
        raise ToolError(f"Cannot take the square root of a negative number ({x:g}).")
    return math.sqrt(x)


@mcp.prompt(
    name="explain-calculation",
    title="Explain a calculation",
    description="Ask the model to work through an arithmetic expression step by step.",
)
def explain_calculation(
    expression: Annotated[str, Field(description="The expression, e.g. '(3 + 4) * sqrt(16)'.")],
) -> str:
    return (
        f"Explain, step by step, how to calculate {expression}. "
        "Check each step with the add, multiply and sqrt tools, then state the final result."
    )


def main() -> None:
    anyio.run(mcp.run_stdio_async, backend="trio")


if __name__ == "__main__":
    main()
