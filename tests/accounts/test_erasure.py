"""Account erasure: one call, one transaction, complete, idempotent, and all-or-nothing."""

import io

import pytest
from django.contrib.auth import get_backends, get_user_model
from django.core.management import CommandError, call_command
from django.db import IntegrityError, OperationalError, connection, transaction
from oauth2_provider.models import (
    get_access_token_model,
    get_grant_model,
    get_refresh_token_model,
)

from accounts import erasure
from accounts.erasure import erase_account, erase_accounts, erasure_selection
from accounts.models import ErasureRecord, User
from memories.models import ERASED, Memory, Thread, ThreadMembership
from memories.services import record_memory, revise_memory
from memories.threads import add_thread_members, create_thread
from tests.accounts.conftest import a_memory_held_elsewhere
from tests.factories import (
    PASSWORD,
    AccessTokenFactory,
    GrantFactory,
    MemoryFactory,
    RefreshTokenFactory,
    UserFactory,
)

AccessToken = get_access_token_model()
RefreshToken = get_refresh_token_model()
Grant = get_grant_model()


@pytest.fixture
def populated(tenant):
    first = record_memory(
        owner=tenant,
        memory_type="decision",
        topic="secret plan",
        content="Buy ACME",
        tags=["m&a"],
        project="falcon",
        scope="work",
    )
    revise_memory(owner=tenant, predecessor_id=first.id, content="Buy ACME in Q3")
    # A hyphenated word and a dotted name: the search vector holds them joined and in parts too.
    call = record_memory(
        owner=tenant,
        memory_type="commitment",
        topic="call",
        content="Call Alice about the falcon-deal on alice.example",
    )
    create_thread(owner=tenant, name="Falcon deal")
    add_thread_members(owner=tenant, name="Falcon deal", memory_ids=[call.id])
    create_thread(owner=tenant, name="Alice follow-ups", pinned=True)
    AccessTokenFactory(user=tenant)
    RefreshTokenFactory(user=tenant)
    GrantFactory(user=tenant)
    return tenant


def test_rewrites_every_memory_of_the_account(populated, other_tenant):
    neighbour = MemoryFactory(owner=other_tenant, content="Buy ACME", topic="plan", tags=["m&a"])
    result = erase_account(user=populated)
    assert not result.already_erased
    rows = Memory.objects.filter(owner=populated)
    assert rows.count() == 3
    for memory in rows:
        assert (memory.content, memory.content_length, memory.topic) == ("[erased]", 8, "[erased]")
        assert memory.tags in ([], ["[erased]"])
        assert memory.project in (None, "[erased]")
        assert memory.scope == "erased"
    # Lifecycle and structure stay: supersession chain and commitment state are not substance.
    assert rows.filter(valid_to__isnull=False).count() == 1
    assert rows.filter(predecessor__isnull=False).count() == 1
    neighbour.refresh_from_db()
    assert (neighbour.content, neighbour.topic, neighbour.tags) == ("Buy ACME", "plan", ["m&a"])


def test_no_tenant_text_survives_anywhere_in_the_memories_table(populated):
    erase_account(user=populated)
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM memories_memory m WHERE m::text ~* %s",
            ["ACME|Alice|secret|falcon|m&a|work"],
        )
        assert cursor.fetchone()[0] == 0
        cursor.execute(
            "SELECT count(*) FROM memories_thread t WHERE t::text ~* %s", ["Alice|falcon|deal"]
        )
        assert cursor.fetchone()[0] == 0


def _vectors_of(owner) -> int:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM memories_memory WHERE owner_id = %s AND embedding IS NOT NULL",
            [owner.pk],
        )
        return cursor.fetchone()[0]


def test_no_vector_of_the_account_survives(populated, other_tenant):
    # A vector stands for the text: matched against guesses, it would tell what was written.
    neighbour = MemoryFactory(owner=other_tenant, content="Buy ACME", embedded=True)
    assert _vectors_of(populated) == 3
    erase_account(user=populated)
    assert _vectors_of(populated) == 0
    assert _vectors_of(neighbour.owner) == 1


def test_overwrites_thread_names_and_keeps_other_tenants_threads(populated, other_tenant):
    neighbour = create_thread(owner=other_tenant, name="Falcon deal")
    erase_account(user=populated)
    assert sorted(Thread.objects.filter(owner=populated).values_list("name", "pinned")) == [
        ("[erased]", False),
        ("[erased]", True),
    ]
    assert ThreadMembership.objects.filter(owner=populated).count() == 1
    neighbour.refresh_from_db()
    assert neighbour.name == "Falcon deal"


def test_revokes_every_oauth_credential_and_deactivates(populated):
    result = erase_account(user=populated)
    assert not AccessToken.objects.filter(user=populated).exists()
    assert not Grant.objects.filter(user=populated).exists()
    assert all(token.revoked is not None for token in RefreshToken.objects.filter(user=populated))
    populated.refresh_from_db()
    assert not populated.is_active and populated.erased_at is not None
    assert not populated.has_usable_password()
    assert populated.username == f"erased-{populated.pk}" and populated.email == ""
    assert result.counts == {
        "memories": 3,
        "threads": 2,
        "oauth_access_tokens": 2,  # one standalone, one paired with the refresh token
        "oauth_refresh_tokens": 1,
        "oauth_grants": 1,
        "oauth_id_tokens": 0,
        "accounts": 1,
        "admin_log_entries": 0,
    }


def test_the_admins_history_of_the_account_no_longer_names_it(populated, staff_member, client):
    """A staff member changed the account in the admin: its history kept the username."""
    from django.contrib import admin
    from django.contrib.admin.models import LogEntry
    from django.test import RequestFactory

    from accounts.admin import UserAdmin

    username = populated.username
    request = RequestFactory().post("/admin/accounts/user/")
    request.user = staff_member
    UserAdmin(type(populated), admin.site).log_change(request, populated, [{"changed": {}}])

    result = erase_account(user=populated, requested_by_staff=staff_member)

    assert result.counts["admin_log_entries"] == 1
    assert not LogEntry.objects.filter(object_repr__icontains=username).exists()
    staff_member.is_superuser = True
    staff_member.save()
    client.force_login(staff_member)
    assert username.encode() not in client.get("/admin/").content  # "Recent actions"


def test_writes_a_content_free_record(populated, staff_member):
    result = erase_account(user=populated, requested_by_staff=staff_member)
    record = ErasureRecord.objects.get()
    assert record == result.record
    assert (record.account, record.requested_by, record.staff_member) == (
        populated,
        "staff",
        staff_member,
    )
    assert record.counts["memories"] == 3
    assert "ACME" not in str(record.__dict__) and "falcon" not in str(record)


def test_logs_the_erased_account_id_once_committed_and_never_its_name(
    populated, caplog, django_capture_on_commit_callbacks
):
    username = populated.username
    with caplog.at_level("INFO", logger="accounts.erasure"):
        with django_capture_on_commit_callbacks() as callbacks:
            erase_account(user=populated)
        assert not [r for r in caplog.records if r.name == "accounts.erasure"]  # not yet
        for callback in callbacks:
            callback()
        erase_account(user=populated)  # already erased: nothing to erase again after a restore
    (line,) = [r for r in caplog.records if r.name == "accounts.erasure"]
    assert line.getMessage() == "account erased"
    assert line.account_id == populated.pk
    assert line.erased_at == ErasureRecord.objects.get().erased_at.isoformat()
    assert username not in str(line.__dict__) and "ACME" not in str(line.__dict__)


def test_a_second_call_changes_nothing_and_says_so(populated):
    first = erase_account(user=populated)
    again = erase_account(user=populated)
    assert again.already_erased and again.record == first.record
    assert ErasureRecord.objects.count() == 1


@pytest.mark.parametrize("failing_step", range(len(erasure.ERASURE_STEPS)))
def test_a_failure_midway_changes_nothing(populated, monkeypatch, failing_step):
    before_memories = sorted(Memory.objects.filter(owner=populated).values_list("content", "topic"))
    tokens_before = AccessToken.objects.filter(user=populated).count()
    threads_before = sorted(Thread.objects.filter(owner=populated).values_list("name", flat=True))

    def explode(user, now):
        raise RuntimeError("injected failure")

    steps = list(erasure.ERASURE_STEPS)
    steps[failing_step] = explode
    monkeypatch.setattr(erasure, "ERASURE_STEPS", steps)
    with pytest.raises(RuntimeError, match="injected failure"):
        erase_account(user=populated)

    assert (
        sorted(Memory.objects.filter(owner=populated).values_list("content", "topic"))
        == before_memories
    )
    assert AccessToken.objects.filter(user=populated).count() == tokens_before
    assert (
        sorted(Thread.objects.filter(owner=populated).values_list("name", flat=True))
        == threads_before
    )
    assert not RefreshToken.objects.filter(user=populated, revoked__isnull=False).exists()
    populated.refresh_from_db()
    assert populated.is_active and populated.erased_at is None
    assert not ErasureRecord.objects.exists()


def test_an_account_too_large_for_a_requests_statement_timeout_is_erased(populated, settings):
    """Nothing bounds how many memories an account holds; its erasure must still finish."""
    with connection.cursor() as cursor:
        # The set-up's bulk insert is no request: unbounded, however loaded the machine.
        cursor.execute("SET statement_timeout = 0")
        cursor.execute(
            "INSERT INTO memories_memory (id, content, content_length, memory_type, topic, scope,"
            " tags, recorded_at, status, owner_id) SELECT gen_random_uuid(), 'note ' || n,"
            " length('note ' || n), 'note', 'bulk', 'personal', '{}', now(), 'active', %s"
            " FROM generate_series(1, 20000) n",
            [populated.pk],
        )
        # The request timeout of this connection, far under what rewriting 20,000 rows takes.
        settings.DATABASE_STATEMENT_TIMEOUT_MS = 20
        cursor.execute("SET statement_timeout = 20")
        try:
            result = erase_account(user=populated)
        finally:
            cursor.execute("RESET statement_timeout")
    assert result.counts["memories"] == 20_003
    assert not Memory.objects.filter(owner=populated).exclude(content=ERASED).exists()


def test_inside_a_callers_transaction_the_erasures_time_ends_with_it(populated, settings):
    """An admin batch or the delete page erases inside its request's transaction: the statements
    after the erasure are bounded by the request's timeout again, not the erasure's."""
    settings.DATABASE_STATEMENT_TIMEOUT_MS = 5000
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("SET LOCAL statement_timeout = 5000")
        erase_account(user=populated)
        cursor.execute("SHOW statement_timeout")
        assert cursor.fetchone()[0] == "5s"


def test_an_erased_account_cannot_write_again(populated):
    erase_account(user=populated)
    populated.refresh_from_db()
    with pytest.raises(Exception, match="account_inactive"):
        record_memory(owner=populated, memory_type="note", topic="t", content="back from the dead")


def selected(*users):
    """A staff member's selection of `users`, listed newest first as a list may show them."""
    return get_user_model().objects.filter(pk__in=[user.pk for user in users]).order_by("-pk")


class TestBatch:
    """erase_accounts: a staff member's selection, erased one account at a time."""

    def test_erases_the_selection_in_key_order_recorded_as_the_staff_members(self, staff_member):
        accounts = UserFactory.create_batch(3)
        batch = erase_accounts(users=selected(*accounts), requested_by=staff_member)
        assert batch.erased == 3 and batch.busy == []
        assert not batch.skipped_self and not batch.already_erased
        records = ErasureRecord.objects.order_by("pk")
        assert [record.account_id for record in records] == sorted(a.pk for a in accounts)
        assert {record.staff_member for record in records} == {staff_member}

    def test_the_staff_members_own_account_is_left_out_and_said_to_be(self, staff_member, tenant):
        batch = erase_accounts(users=selected(staff_member, tenant), requested_by=staff_member)
        assert batch.skipped_self and batch.erased == 1
        staff_member.refresh_from_db()
        assert staff_member.erased_at is None
        assert list(ErasureRecord.objects.values_list("account_id", flat=True)) == [tenant.pk]

    def test_accounts_erased_already_are_left_out_and_said_to_be(self, staff_member, tenant):
        erase_account(user=tenant)
        batch = erase_accounts(users=selected(tenant), requested_by=staff_member)
        assert batch.already_erased and batch.targets == [] and batch.erased == 0
        assert ErasureRecord.objects.filter(account=tenant).count() == 1

    def test_an_account_erased_meanwhile_is_not_counted(self, staff_member, tenant, monkeypatch):
        """Selected before another erasure of it committed, it is found erased under its lock."""
        real = erasure.erase_account

        def erased_just_before(*, user, requested_by_staff):
            real(user=user)
            return real(user=user, requested_by_staff=requested_by_staff)

        monkeypatch.setattr(erasure, "erase_account", erased_just_before)
        batch = erase_accounts(users=selected(tenant), requested_by=staff_member)
        assert batch.targets == [tenant] and batch.erased == 0

    def test_an_account_in_use_is_left_as_it_was_and_the_others_are_erased(
        self, transactional_db, staff_member, tenant, other_tenant
    ):
        MemoryFactory(owner=tenant)
        username = tenant.username
        with a_memory_held_elsewhere(tenant):
            batch = erase_accounts(users=selected(tenant, other_tenant), requested_by=staff_member)
        assert batch.busy == [username] and batch.erased == 1
        tenant.refresh_from_db()
        assert tenant.erased_at is None
        assert list(ErasureRecord.objects.values_list("account_id", flat=True)) == [other_tenant.pk]

    def test_any_other_database_failure_ends_the_batch(self, staff_member, tenant, monkeypatch):
        def connection_lost(*, user, requested_by_staff):
            raise OperationalError("server closed the connection unexpectedly")

        monkeypatch.setattr(erasure, "erase_account", connection_lost)
        with pytest.raises(OperationalError, match="server closed"):
            erase_accounts(users=selected(tenant), requested_by=staff_member)

    def test_the_selection_says_what_a_batch_would_erase_and_changes_nothing(
        self, staff_member, tenant, other_tenant
    ):
        erase_account(user=other_tenant)
        later = UserFactory()
        chosen = erasure_selection(
            users=selected(staff_member, later, tenant, other_tenant), requested_by=staff_member
        )
        assert chosen.targets == sorted([tenant, later], key=lambda user: user.pk)
        assert chosen.skipped_self and chosen.already_erased
        assert ErasureRecord.objects.count() == 1


def test_the_database_keeps_an_erased_account_inactive(populated):
    """Whatever writes the row (the admin, a shell, a script), erased means inactive."""
    erase_account(user=populated)
    with (
        pytest.raises(IntegrityError, match="accounts_user_erased_is_inactive"),
        transaction.atomic(),
    ):
        User.objects.filter(pk=populated.pk).update(is_active=True)
    populated.refresh_from_db()
    assert not populated.is_active


def test_an_erased_account_never_logs_in_even_given_a_usable_password(populated, client):
    erase_account(user=populated)
    populated.refresh_from_db()
    populated.set_password(PASSWORD)
    populated.save()
    assert not client.login(username=populated.username, password=PASSWORD)
    # As if its row said active, which the database refuses: no backend takes it, at log-in or
    # for a session.
    populated.is_active = True
    assert not any(backend.user_can_authenticate(populated) for backend in get_backends())


class TestCommand:
    def test_asks_for_confirmation(self, populated, monkeypatch):
        monkeypatch.setattr("builtins.input", lambda prompt: "wrong-name")
        with pytest.raises(CommandError, match="nothing was changed"):
            call_command("erase_account", populated.username)
        assert not ErasureRecord.objects.exists()

    def test_without_a_terminal_to_confirm_on_refuses_and_changes_nothing(
        self, populated, monkeypatch
    ):
        monkeypatch.setattr("sys.stdin", io.StringIO(""))  # run from cron, without --yes
        with pytest.raises(CommandError, match=r"pass --yes.*nothing was changed"):
            call_command("erase_account", populated.username, stdout=io.StringIO())
        assert not ErasureRecord.objects.exists()

    def test_erases_after_confirmation(self, populated, monkeypatch):
        username = populated.username
        monkeypatch.setattr("builtins.input", lambda prompt: username)
        out = io.StringIO()
        call_command("erase_account", username, stdout=out)
        assert "memories=3" in out.getvalue()
        assert ErasureRecord.objects.get().requested_by == "user"

    def test_records_the_staff_member(self, populated, staff_member):
        call_command(
            "erase_account",
            populated.username,
            "--yes",
            "--staff",
            staff_member.username,
            stdout=io.StringIO(),
        )
        assert ErasureRecord.objects.get().staff_member == staff_member

    def test_a_row_held_past_the_lock_timeout_is_one_line_and_changes_nothing(
        self, transactional_db, populated
    ):
        with (
            a_memory_held_elsewhere(populated),
            pytest.raises(CommandError) as refused,
        ):
            call_command("erase_account", populated.username, "--yes", stdout=io.StringIO())
        assert str(refused.value) == (
            f"the database could not erase {populated.username!r} now (canceling statement due "
            "to lock timeout); nothing was changed, run the command again"
        )
        assert not ErasureRecord.objects.exists()
        assert not Memory.objects.filter(owner=populated, content=ERASED).exists()

    def test_unknown_account(self, db):
        with pytest.raises(CommandError, match="no account named"):
            call_command("erase_account", "nobody", "--yes")
        with pytest.raises(CommandError) as refused:
            call_command("erase_account", "x" * 100_000, "--yes")
        assert str(refused.value) == f"no account named '{'x' * 150}…'"

    # A shell passes bytes that are not UTF-8 to Python as lone surrogates.
    @pytest.mark.parametrize("name", ["bad\x00name", "bad\udcffname"])
    @pytest.mark.parametrize("option", ["USERNAME", "--staff"])
    def test_a_name_no_account_can_have_is_refused_naming_the_option(
        self, populated, staff_member, option, name
    ):
        arguments = [name] if option == "USERNAME" else [populated.username, "--staff", name]
        with pytest.raises(CommandError, match=rf"^{option} must not contain .*nothing was"):
            call_command("erase_account", *arguments, "--yes", stdout=io.StringIO())
        assert not ErasureRecord.objects.exists()

    def test_an_empty_staff_name_is_refused_not_read_as_none(self, populated):
        """`--staff "$STAFF"` with the variable unset: the record would say the user asked."""
        with pytest.raises(CommandError, match="'' is not an active staff account"):
            call_command(
                "erase_account", populated.username, "--yes", "--staff", "", stdout=io.StringIO()
            )
        assert not ErasureRecord.objects.exists()
