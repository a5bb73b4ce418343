"""What the integration tests share: the API servers they run against (the local fake, or the real cluster
``KUBEVENTS_E2E_KUBECONFIG`` points at), namespaces and tokens made with the official client, recording
through each sink, and reading events back from the server.

Everything that waits has a limit: ``REQUEST_TIMEOUT`` for the tests' own requests, ``WAIT`` for the
broadcasters' ``wait_idle`` and shutdown.
"""

from __future__ import annotations

import asyncio
import json
import secrets
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import kubernetes.client as k8s
import kubernetes.config
import kubernetes_asyncio.client as k8s_asyncio
import kubernetes_asyncio.config

import kubevents
from fake_apiserver import FakeCluster
from kubevents.sinks import AsyncCoreV1Sink, CoreV1Sink

REQUEST_TIMEOUT = 30
WAIT = 60

CORE_V1 = "core/v1"
EVENTS_V1 = "events.k8s.io/v1"


def with_token(cfg: Any, token: str) -> Any:
    """``cfg`` (either client's ``Configuration``) authenticating with the bearer ``token`` alone."""
    cfg.cert_file = cfg.key_file = None
    cfg.refresh_api_key_hook = None
    # "BearerToken" for the current clients, "authorization" for kubernetes < 35.
    cfg.api_key = {"BearerToken": f"Bearer {token}", "authorization": f"Bearer {token}"}
    cfg.api_key_prefix = {}
    return cfg


class FakeServer:
    """The local fake (``FakeCluster``), with its admin token as the default credentials."""

    name = "fake"

    def __init__(self, fake: FakeCluster) -> None:
        self.fake = fake
        self.namespace = ""  # the test's namespace, set by the ``server`` fixture

    def configuration(self, token: str | None = None) -> k8s.Configuration:
        return with_token(k8s.Configuration(host=self.fake.host), token or FakeCluster.ADMIN_TOKEN)

    async def async_configuration(self, token: str | None = None) -> k8s_asyncio.Configuration:
        return with_token(k8s_asyncio.Configuration(host=self.fake.host), token or FakeCluster.ADMIN_TOKEN)

    def api_client(self, token: str | None = None) -> k8s.ApiClient:
        return k8s.ApiClient(self.configuration(token))


class RealServer:
    """The cluster of a kubeconfig, with its credentials as the default ones."""

    name = "real"
    fake = None

    def __init__(self, kubeconfig: str) -> None:
        self.kubeconfig = kubeconfig
        self.namespace = ""  # the test's namespace, set by the ``server`` fixture

    def configuration(self, token: str | None = None) -> k8s.Configuration:
        cfg = k8s.Configuration()
        kubernetes.config.load_kube_config(config_file=self.kubeconfig, client_configuration=cfg, persist_config=False)
        return cfg if token is None else with_token(cfg, token)

    async def async_configuration(self, token: str | None = None) -> k8s_asyncio.Configuration:
        cfg = k8s_asyncio.Configuration()
        await kubernetes_asyncio.config.load_kube_config(
            config_file=self.kubeconfig, client_configuration=cfg, persist_config=False
        )
        return cfg if token is None else with_token(cfg, token)

    def api_client(self, token: str | None = None) -> k8s.ApiClient:
        return k8s.ApiClient(self.configuration(token))


Server = FakeServer | RealServer


def unique_name(prefix: str = "kubevents-e2e") -> str:
    return f"{prefix}-{secrets.token_hex(4)}"


@contextmanager
def fresh_namespace(api_client: k8s.ApiClient) -> Iterator[str]:
    """A namespace ``kubevents-e2e-<random>``, deleted on the way out (the server then deletes its content in
    the background)."""
    core = k8s.CoreV1Api(api_client)
    name = unique_name()
    body = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}
    # Raw answers: the tests need none of the models, whose fields differ between client versions.
    core.create_namespace(body, _preload_content=False, _request_timeout=REQUEST_TIMEOUT)
    try:
        yield name
    finally:
        core.delete_namespace(name, _preload_content=False, _request_timeout=REQUEST_TIMEOUT)


def service_account_token(api_client: k8s.ApiClient, namespace: str) -> tuple[str, str]:
    """A new service account in ``namespace``, which no RBAC binding names, and a token for it (TokenRequest):
    ``(user name, token)``."""
    core = k8s.CoreV1Api(api_client)
    name = unique_name("no-rbac")
    core.create_namespaced_service_account(
        namespace, {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": name}},
        _preload_content=False, _request_timeout=REQUEST_TIMEOUT,
    )
    request = {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {"expirationSeconds": 600}}
    answer = core.create_namespaced_service_account_token(
        name, namespace, request, _preload_content=False, _request_timeout=REQUEST_TIMEOUT
    )
    return f"system:serviceaccount:{namespace}:{name}", json.loads(answer.data)["status"]["token"]


def list_events(api_client: k8s.ApiClient, namespace: str, api: str = CORE_V1) -> list[dict[str, Any]]:
    """The events of ``namespace`` as the server serves them (its JSON, not the client's models)."""
    client = k8s.CoreV1Api(api_client) if api == CORE_V1 else k8s.EventsV1Api(api_client)
    answer = client.list_namespaced_event(namespace, _preload_content=False, _request_timeout=REQUEST_TIMEOUT)
    return json.loads(answer.data)["items"]


# Sink name: (the API it writes, whether it is async, how to make it from an API client of the right kind).
SINKS: dict[str, tuple[str, bool, Callable[[Any], Any]]] = {
    "CoreV1Sink": (CORE_V1, False, lambda c: CoreV1Sink(k8s.CoreV1Api(c))),
    "AsyncCoreV1Sink": (CORE_V1, True, lambda c: AsyncCoreV1Sink(k8s_asyncio.CoreV1Api(c))),
    "EventsV1Sink": (EVENTS_V1, False, lambda c: kubevents.EventsV1Sink(k8s.EventsV1Api(c))),
    "AsyncEventsV1Sink": (EVENTS_V1, True, lambda c: kubevents.AsyncEventsV1Sink(k8s_asyncio.EventsV1Api(c))),
}
CORE_V1_SINKS = [name for name, (api, _, _) in SINKS.items() if api == CORE_V1]
EVENTS_V1_SINKS = [name for name, (api, _, _) in SINKS.items() if api == EVENTS_V1]


def start(sink: Any, api: str, clock: Any, **options: Any) -> Any:
    """A broadcaster of ``api`` recording to ``sink`` on ``clock``."""
    if api == CORE_V1:
        b = kubevents.Broadcaster(clock=clock, **options)
        b.start_recording_to_sink(sink)
    else:
        b = kubevents.EventsBroadcaster(clock=clock, **options)
        b.start_recording_to_sink(sink)
    return b


def record(server: Server, sink_name: str, drive: Callable[[Any], object], *, clock: Any, token: str | None = None,
           shutdown_timeout: float = WAIT, **options: Any) -> dict[str, Any]:
    """Records through the sink ``sink_name`` writing to ``server``: ``drive(broadcaster)`` records, then the
    broadcaster shuts down within ``shutdown_timeout`` seconds (or the test fails with ``TimeoutError``).
    Returns its final stats.

    An async sink is made and started on an asyncio loop, which runs its calls while ``drive`` runs on a
    worker thread; that loop's coroutine shuts the broadcaster down with ``aclose``."""
    api, is_async, make = SINKS[sink_name]
    if not is_async:
        with server.api_client(token) as client:
            b = start(make(client), api, clock, **options)
            try:
                drive(b)
            finally:
                stats = b.shutdown(timeout=shutdown_timeout)
        return stats

    async def main() -> dict[str, Any]:
        async with k8s_asyncio.ApiClient(await server.async_configuration(token)) as client:
            b = start(make(client), api, clock, **options)
            try:
                await asyncio.to_thread(drive, b)
            finally:
                stats = await b.aclose(timeout=shutdown_timeout)
        return stats

    return asyncio.run(main())
