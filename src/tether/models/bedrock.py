"""Models on Amazon Bedrock through the Converse API of the official `boto3` SDK (extra
`tether[bedrock]`).

    BedrockModel("us.anthropic.claude-sonnet-4-5-20250929-v1:0")   # AWS credentials, region
    BedrockModel("amazon.nova-pro-v1:0", region="eu-west-1")

The Converse API speaks to every model Bedrock serves (Claude, Nova, Llama, Mistral,
...), with one message format and one stream; Anthropic's own Bedrock client would
reach Claude alone. boto3 is synchronous, so each request's stream is read in a thread
of its own and handed to the event loop as it arrives; a run that stops early (its
time limit, a cancel) shuts that request's socket, so a read blocked in the thread
returns at once and the thread ends; nothing waits for it on the event loop.
Credentials and region come from boto3's usual places (`AWS_PROFILE`, the
`AWS_ACCESS_KEY_ID` pair, `AWS_BEARER_TOKEN_BEDROCK`, `AWS_REGION`, instance roles)
unless given. tether retries as it does for every provider; boto3's own retries are off.
"""

from __future__ import annotations

import asyncio
import os
import re
import threading
import urllib.parse
from collections.abc import AsyncGenerator
from typing import Any

from tether.errors import ConfigurationError, ProviderBlockedError
from tether.models import _sdk
from tether.models._bedrock_converse import CACHE_POINT, PROVIDER, Reader, converse_messages
from tether.models._bedrock_feed import END, Feed, watch_connections
from tether.models.base import ModelRequest, StreamItem
from tether.models.profiles import ModelProfile

__all__ = ["BedrockModel"]


class BedrockModel(_sdk.HTTPAdapter):
    """A model on Amazon Bedrock, by its model id or inference profile id (such as
    "us.anthropic.claude-sonnet-4-5-20250929-v1:0").

    `region`, `aws_profile` and the key arguments pick the account (default: boto3's
    usual places); `base_url` points it elsewhere (a VPC endpoint, a proxy, a test
    server); `client` takes a ready `bedrock-runtime` client (its new connections are
    then watched as tether's own are, so that a stopped run can shut its socket; other
    threads' requests are untouched). `cache=False` leaves out the prompt-cache points
    (placed after the system prompt, the tools and the latest turn, for the models that
    take them).
    """

    key_hint = (
        "the AWS credentials (AWS_PROFILE, AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or "
        "AWS_BEARER_TOKEN_BEDROCK) and that the model is enabled in the region"
    )

    def __init__(
        self,
        name: str,
        *,
        region: str | None = None,
        aws_profile: str | None = None,
        aws_access_key_id: str | None = None,
        aws_secret_access_key: str | None = None,
        aws_session_token: str | None = None,
        base_url: str | None = None,
        client: Any = None,
        max_retries: int = _sdk.DEFAULT_MAX_RETRIES,
        timeout_seconds: float = _sdk.DEFAULT_TIMEOUT_SECONDS,
        cache: bool = True,
        profile: ModelProfile | None = None,
    ) -> None:
        super().__init__(name, PROVIDER, profile, max_retries)
        self._boto3 = _sdk.require("boto3", "bedrock")
        self._given = client
        self._options = {
            "region_name": region,
            "profile_name": aws_profile,
            "aws_access_key_id": aws_access_key_id,
            "aws_secret_access_key": aws_secret_access_key,
            "aws_session_token": aws_session_token,
        }
        self._base_url = base_url.rstrip("/") if base_url else None
        self._timeout = timeout_seconds
        self._cache = cache
        self._client: Any = client
        self._watching = False
        self._lock = threading.Lock()

    @property
    def family(self) -> str | None:
        """Who made the model ("anthropic", "amazon", "meta", ...), from its id: the
        harness profile that fits it is that maker's."""
        match = re.match(r"(?:[a-z]{2,6}\.)?([a-z0-9-]+)\.", self._name)
        return match.group(1) if match else None

    def _endpoint(self) -> str:
        if self._base_url:
            return self._base_url
        if self._client is not None:
            return str(self._client.meta.endpoint_url)
        region = self._options["region_name"] or os.environ.get("AWS_REGION")
        region = region or os.environ.get("AWS_DEFAULT_REGION") or "us-east-1"
        return f"https://bedrock-runtime.{region}.amazonaws.com"

    def _where(self) -> str:
        model = urllib.parse.quote(self._name, safe="")
        return f"{self._endpoint()}/model/{model}/converse-stream"

    @property
    def server_url(self) -> str:
        """The URL requests go to."""
        return self._where()

    def _bedrock(self) -> Any:
        """The boto3 client, made once (it is safe to share between threads)."""
        with self._lock:
            if self._client is None:
                if _sdk.blocked_reason is not None and not _sdk.on_this_machine(self._base_url):
                    raise ProviderBlockedError(_sdk.blocked_reason)
                boto3 = self._boto3()
                config = boto3.session.Config(
                    read_timeout=self._timeout,
                    connect_timeout=min(self._timeout, 60.0),
                    retries={"total_max_attempts": 1, "mode": "standard"},  # tether retries
                )
                options = {k: v for k, v in self._options.items() if v is not None}
                profile = options.pop("profile_name", None)
                session = boto3.session.Session(profile_name=profile)
                try:
                    self._client = session.client(
                        "bedrock-runtime", endpoint_url=self._base_url, config=config, **options
                    )
                except Exception as exc:  # no region, an unknown profile
                    raise ConfigurationError(
                        f"cannot make a Bedrock client for {self._name!r}: {exc}"
                    ) from exc
            if not self._watching:
                watch_connections(self._client)
                self._watching = True
            return self._client

    async def _attempt(self, request: ModelRequest) -> AsyncGenerator[StreamItem, None]:
        if self._client is None and self._given is None:
            await asyncio.to_thread(self._bedrock)  # boto3's import and setup take a while
        params = self.params(request)
        reader = Reader()
        with Feed(asyncio.get_running_loop(), self, params) as feed:
            while (event := await feed.next()) is not END:
                delta = reader.read(event)
                if delta is not None:
                    yield delta
            reader.request_id = feed.request_id
        yield reader.response(self._name)

    def params(self, request: ModelRequest) -> dict[str, Any]:
        """The keyword arguments of `converse_stream` for `request`."""
        settings = request.settings
        cache = self._cache and self.profile.supports_caching
        params: dict[str, Any] = {
            "modelId": self._name,
            "messages": converse_messages(
                request.messages, cache=cache, stable=request.stable_messages
            ),
        }
        if request.system_prompt:
            params["system"] = [{"text": request.system_prompt}, *([CACHE_POINT] * cache)]
        if request.tools:
            tools: list[dict[str, Any]] = [
                {
                    "toolSpec": {
                        "name": t.name,
                        "description": t.description or t.name,
                        "inputSchema": {"json": dict(t.parameters)},
                    }
                }
                for t in request.tools
            ]
            params["toolConfig"] = {"tools": [*tools, *([CACHE_POINT] * cache)]}
            if request.force_output and request.output_tool is not None:
                params["toolConfig"]["toolChoice"] = {"tool": {"name": request.output_tool}}
        inference: dict[str, Any] = {}
        if settings.max_tokens or self.profile.max_output_tokens:
            inference["maxTokens"] = settings.max_tokens or self.profile.max_output_tokens
        if settings.temperature is not None:
            inference["temperature"] = settings.temperature
        if inference:
            params["inferenceConfig"] = inference
        if settings.extra:  # the model's own fields, such as Claude's "thinking"
            params["additionalModelRequestFields"] = dict(settings.extra)
        return params
