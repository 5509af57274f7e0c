"""An MCP server behind OAuth, with its own authorization server (`python oauth.py PORT`).

It serves the spec's discovery documents, dynamic registration, an authorization
endpoint that redirects straight back with a code (no person), and a token endpoint for
the authorization code, refresh and client credentials grants (client `agentloop-test`,
secret `client-secret-for-tests`). Its access tokens are opaque (`opaque-...`, no JWT or
`Bearer` shape a redactor would recognise), and `/mcp` refuses any other with 401.

Its tools misbehave with the token on purpose: `whoami` returns it bare, `fail` puts
it in its error, and both write it to stderr and send it as a log message, and
`confirm` quotes it in the question it asks the user (elicitation), so a test can check
that a client keeps it out of records, events, logs, errors, questions and checkpoints.
"""

from __future__ import annotations

import base64
import secrets
import sys
from typing import Any
from urllib.parse import urlencode

import uvicorn
from mcp.server.fastmcp import Context, FastMCP
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response
from starlette.routing import Mount, Route

CLIENT_ID = "agentloop-test"
CLIENT_SECRET = "client-secret-for-tests"

PORT = int(sys.argv[1])
BASE = f"http://127.0.0.1:{PORT}"
ISSUED: set[str] = set()
CODES: set[str] = set()

mcp = FastMCP("oauth-test")


def _token_of(ctx: Context[Any, Any, Any]) -> str:
    request = ctx.request_context.request
    header = request.headers.get("authorization", "") if request is not None else ""
    return header.removeprefix("Bearer ")


@mcp.tool()
async def whoami(ctx: Context[Any, Any, Any]) -> str:
    """Who the caller is (returns its access token, which a server should never do)."""
    token = _token_of(ctx)
    print(f"whoami called with {token}", file=sys.stderr, flush=True)
    await ctx.info(f"caller token {token}")
    return f"you hold {token}"


@mcp.tool()
async def fail(ctx: Context[Any, Any, Any]) -> str:
    """Always fails, quoting the caller's token in its error."""
    token = _token_of(ctx)
    print(f"fail called with {token}", file=sys.stderr, flush=True)
    msg = f"refused token {token}"
    raise ValueError(msg)


@mcp.tool()
async def confirm(ctx: Context[Any, Any, Any]) -> str:
    """Ask the user to confirm, quoting the caller's token in the question."""
    token = _token_of(ctx)
    schema = {"type": "object", "properties": {"note": {"type": "string"}}}
    answer = await ctx.request_context.session.elicit_form(
        f"Go on with the token {token}?", schema, ctx.request_id
    )
    return f"answered {answer.action}: {answer.content}"


def _issue() -> dict[str, Any]:
    access, refresh = f"opaque-{secrets.token_hex(16)}", f"opaque-{secrets.token_hex(16)}"
    ISSUED.add(access)
    return {
        "access_token": access,
        "token_type": "Bearer",
        "expires_in": 3600,
        "refresh_token": refresh,
    }


async def protected_resource(_: Request) -> Response:
    return JSONResponse({"resource": f"{BASE}/mcp", "authorization_servers": [BASE]})


async def authorization_server(_: Request) -> Response:
    return JSONResponse(
        {
            "issuer": BASE,
            "authorization_endpoint": f"{BASE}/authorize",
            "token_endpoint": f"{BASE}/token",
            "registration_endpoint": f"{BASE}/register",
            "response_types_supported": ["code"],
            "grant_types_supported": ["authorization_code", "refresh_token", "client_credentials"],
            "code_challenge_methods_supported": ["S256"],
            "token_endpoint_auth_methods_supported": ["client_secret_basic", "none"],
        }
    )


async def register(request: Request) -> Response:
    metadata = await request.json()
    return JSONResponse(
        {**metadata, "client_id": f"registered-{secrets.token_hex(4)}"}, status_code=201
    )


async def authorize(request: Request) -> Response:
    code = f"code-{secrets.token_hex(8)}"
    CODES.add(code)
    query = {"code": code, "state": request.query_params.get("state", "")}
    return RedirectResponse(f"{request.query_params['redirect_uri']}?{urlencode(query)}")


async def token(request: Request) -> Response:
    form = await request.form()
    grant = form.get("grant_type")
    if grant == "client_credentials":
        basic = request.headers.get("authorization", "").removeprefix("Basic ")
        expected = base64.b64encode(f"{CLIENT_ID}:{CLIENT_SECRET}".encode()).decode()
        if basic != expected:
            return JSONResponse({"error": "invalid_client"}, status_code=401)
        return JSONResponse(_issue())
    if grant == "authorization_code" and form.get("code") in CODES:
        CODES.discard(str(form.get("code")))
        return JSONResponse(_issue())
    if grant == "refresh_token":
        return JSONResponse(_issue())
    return JSONResponse({"error": "invalid_grant"}, status_code=400)


class RequireToken:
    """`/mcp` only with a token this server issued."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            headers = dict(scope["headers"])
            given = headers.get(b"authorization", b"").decode().removeprefix("Bearer ")
            if given not in ISSUED:
                metadata = f"{BASE}/.well-known/oauth-protected-resource/mcp"
                response = JSONResponse(
                    {"error": "invalid_token"},
                    status_code=401,
                    headers={"WWW-Authenticate": f'Bearer resource_metadata="{metadata}"'},
                )
                await response(scope, receive, send)
                return
        await self.app(scope, receive, send)


mcp_app = mcp.streamable_http_app()
app = Starlette(
    routes=[
        Route("/.well-known/oauth-protected-resource/mcp", protected_resource),
        Route("/.well-known/oauth-protected-resource", protected_resource),
        Route("/.well-known/oauth-authorization-server", authorization_server),
        Route("/register", register, methods=["POST"]),
        Route("/authorize", authorize),
        Route("/token", token, methods=["POST"]),
        Mount("/", app=RequireToken(mcp_app)),
    ],
    lifespan=lambda _app: mcp.session_manager.run(),
)

if __name__ == "__main__":
    uvicorn.run(app, host="127.0.0.1", port=PORT, log_level="warning")
