"""Speaking to the Bot Connector through the SDK's API client: post and update activities in a conversation, stream a
reply in a 1:1 chat, and open a person's 1:1 chat with the bot (proactively: the hub writes first)."""

from __future__ import annotations

from microsoft_teams.api.activities import MessageActivityInput
from microsoft_teams.api.clients import ApiClient
from microsoft_teams.api.clients.conversation import CreateConversationParams
from microsoft_teams.api.models import Account, ConversationAccount, ConversationReference
from microsoft_teams.apps.http_stream import HttpStream
from microsoft_teams.cards import AdaptiveCard

from elicithub.surfaces.teams.records import Chat, TeamsRecords

Place = tuple[str, str]
"""Where a message goes: the Bot Connector's service URL, and the conversation."""


def card_message(card: AdaptiveCard) -> MessageActivityInput:
    """A message holding one card."""
    return MessageActivityInput().add_card(card)


def text_message(text: str) -> MessageActivityInput:
    return MessageActivityInput(text=text)


class Connector:
    """The Bot Connector of each conversation, as the SDK reaches it (its token callable gives the bot's token)."""

    def __init__(self, api: ApiClient, records: TeamsRecords, app_id: str, tenant_id: str, service_url: str | None):
        self.api = api
        self.records = records
        self.bot_id = f"28:{app_id}"
        self.tenant_id = tenant_id
        self.service_url = service_url
        """The Bot Connector where approvers' chats are opened (the config's); else each person's own."""

    def _at(self, service_url: str) -> ApiClient:
        return self.api.from_service_url(service_url)

    async def post(self, place: Place, message: MessageActivityInput) -> str:
        """Post a message; its activity id."""
        service_url, conversation_id = place
        sent = await self._at(service_url).conversations.create_activity(conversation_id, message)
        return sent.id

    async def update(self, place: Place, activity_id: str, message: MessageActivityInput) -> None:
        """Replace a message's content, for everyone who sees it."""
        service_url, conversation_id = place
        await self._at(service_url).conversations.update_activity(conversation_id, activity_id, message)

    def stream(self, chat: Chat) -> HttpStream:
        """Teams' streaming of one reply in a 1:1 chat (typing updates, then the final message)."""
        reference = ConversationReference(
            service_url=chat.service_url,
            activity_id=chat.reply_to,
            bot=Account(id=chat.bot_id),
            channel_id="msteams",
            conversation=ConversationAccount(id=chat.conversation_id, conversation_type="personal"),
            user=Account(id=chat.teams_user, aad_object_id=chat.object_id),
        )
        return HttpStream(self.api, reference)

    async def open_chat(self, object_id: str) -> Place | None:
        """The person's 1:1 chat with the bot, created if need be (Teams gives the existing one back); None when no
        Bot Connector is known yet (no `service_url` configured, and none of their activities seen)."""
        person = await self.records.person(object_id)
        service_url = self.service_url or (person.service_url if person is not None else None)
        if service_url is None:
            return None
        member = {"id": person.teams_user if person is not None else object_id, "aadObjectId": object_id}
        # `bot` and `isGroup` are not fields of the SDK's model: sent as written, which Teams reads.
        params = CreateConversationParams.model_validate(
            {
                "bot": {"id": self.bot_id},
                "members": [member],
                "isGroup": False,
                "tenantId": self.tenant_id,
                "channelData": {"tenant": {"id": self.tenant_id}},
            }
        )
        created = await self._at(service_url).conversations.create(params)
        return service_url, created.id
