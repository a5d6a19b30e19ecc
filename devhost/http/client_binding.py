"""The `durableClient` input binding value: the JSON string the Durable extension hands to the Python worker.

Built like the extension's `BindingHelper.DurableOrchestrationClientToString` + `HttpApiHandler` link builders
(docs/durable-protocol.md §2.1), with this host's own base URL for both the public webhooks and the RPC API.
"""

from __future__ import annotations

from urllib.parse import quote, quote_plus

from pydantic import BaseModel, ConfigDict, Field

WEBHOOK_PATH = "/runtime/webhooks/durabletask"
RPC_PATH = "/durabletask/"
INSTANCE_ID_PLACEHOLDER = "INSTANCEID"
DEFAULT_CONNECTION_NAME = "Storage"


class CreationUrls(BaseModel):
    model_config = ConfigDict(populate_by_name=True)

    create_new_instance_post_uri: str = Field(alias="createNewInstancePostUri")
    create_and_wait_on_new_instance_post_uri: str = Field(alias="createAndWaitOnNewInstancePostUri")


class ManagementUrls(BaseModel):
    """HttpManagementPayload: every management link of one instance (`create_check_status_response` copies it)."""

    model_config = ConfigDict(populate_by_name=True)

    id: str
    status_query_get_uri: str = Field(alias="statusQueryGetUri")
    send_event_post_uri: str = Field(alias="sendEventPostUri")
    terminate_post_uri: str = Field(alias="terminatePostUri")
    rewind_post_uri: str = Field(alias="rewindPostUri")
    purge_history_delete_uri: str = Field(alias="purgeHistoryDeleteUri")
    restart_post_uri: str = Field(alias="restartPostUri")
    suspend_post_uri: str = Field(alias="suspendPostUri")
    resume_post_uri: str = Field(alias="resumePostUri")

    def check_status_body(self) -> dict[str, str]:
        """The body of the extension's own 202 check-status response (it has no rewind link)."""
        body = self.model_dump(by_alias=True)
        body.pop("rewindPostUri")
        return body


class ClientBinding(BaseModel):
    model_config = ConfigDict(populate_by_name=True)

    task_hub_name: str = Field(alias="taskHubName")
    connection_name: str | None = Field(default=None, alias="connectionName")
    creation_urls: CreationUrls = Field(alias="creationUrls")
    management_urls: ManagementUrls = Field(alias="managementUrls")
    base_url: str = Field(alias="baseUrl")
    required_query_string_parameters: str = Field(default="", alias="requiredQueryStringParameters")
    rpc_base_url: str = Field(alias="rpcBaseUrl")
    http_base_url: str | None = Field(default=None, alias="httpBaseUrl")

    def to_json(self) -> str:
        return self.model_dump_json(by_alias=True)


def webutility_url_encode(text: str) -> str:
    """System.Net.WebUtility.UrlEncode: ASCII letters, digits and -_.!*() stay, a space becomes '+', every other UTF-8
    byte %XX in upper case (`quote_plus` but for '~', which it keeps)."""
    return quote_plus(text, safe="!*()").replace("~", "%7E")


def webhook_base_url(origin: str) -> str:
    return origin.rstrip("/") + WEBHOOK_PATH


def management_urls(
    origin: str,
    instance_id: str,
    *,
    task_hub: str,
    connection: str | None = None,
    return_internal_server_error_on_failure: bool = False,
    code: str | None = None,
) -> ManagementUrls:
    """HttpApiHandler.GetClientResponseLinks for `origin` (scheme://host:port of the request or of the host);
    `code`: the webhooks' key, when devhost checks keys (as every link on Azure carries the system key)."""
    # The extension encodes the id, hub and connection with WebUtility.UrlEncode (v2.13.7; extension issue #2590): an
    # id with a space gets a '+', which no one decodes in a path, so on Azure that link asks for another instance
    # ('a+b') and is 404; devhost's API reads the '+' as a '+' too (DurableHttpApi.handle).
    prefix = f"{webhook_base_url(origin)}/instances/{webutility_url_encode(instance_id)}"
    suffix = (f"taskHub={webutility_url_encode(task_hub)}"
              f"&connection={webutility_url_encode(connection or DEFAULT_CONNECTION_NAME)}")
    if code:
        suffix += f"&code={quote(code, safe='')}"
    status_uri = f"{prefix}?{suffix}"
    if return_internal_server_error_on_failure:
        status_uri += "&returnInternalServerErrorOnFailure=true"
    return ManagementUrls(
        id=instance_id,
        statusQueryGetUri=status_uri,
        sendEventPostUri=f"{prefix}/raiseEvent/{{eventName}}?{suffix}",
        terminatePostUri=f"{prefix}/terminate?reason={{text}}&{suffix}",
        rewindPostUri=f"{prefix}/rewind?reason={{text}}&{suffix}",
        purgeHistoryDeleteUri=f"{prefix}?{suffix}",
        restartPostUri=f"{prefix}/restart?{suffix}",
        suspendPostUri=f"{prefix}/suspend?reason={{text}}&{suffix}",
        resumePostUri=f"{prefix}/resume?reason={{text}}&{suffix}",
    )


def build_client_binding(
    origin: str, *, task_hub: str, connection: str | None = None, rpc_origin: str | None = None,
    code: str | None = None,
) -> ClientBinding:
    """The binding for one invocation. The SDK replaces the literal INSTANCEID in the management links."""
    base = webhook_base_url(origin)
    instance_prefix = f"{base}/orchestrators/{{functionName}}[/{{instanceId}}]"
    # The real links end with "?" + the system key query; with no keys checked nothing follows the "?".
    key_query = f"code={quote(code, safe='')}" if code else ""
    return ClientBinding(
        taskHubName=task_hub,
        connectionName=connection,
        creationUrls=CreationUrls(
            createNewInstancePostUri=f"{instance_prefix}?{key_query}",
            createAndWaitOnNewInstancePostUri=(
                f"{instance_prefix}?timeout={{timeoutInSeconds}}&pollingInterval={{intervalInSeconds}}&{key_query}"
            ),
        ),
        managementUrls=management_urls(origin, INSTANCE_ID_PLACEHOLDER, task_hub=task_hub, connection=connection,
                                       code=code),
        baseUrl=base,
        requiredQueryStringParameters=key_query,
        rpcBaseUrl=(rpc_origin or origin).rstrip("/") + RPC_PATH,
        httpBaseUrl=None,
    )
