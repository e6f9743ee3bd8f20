"""The fields that keep the tenant in every key (migration 0008, docs/operations.md).

In the database the tenant tables' primary keys are `(owner_id, id)`, and a link from one tenant
row to another is a composite foreign key `(owner_id, <column>) -> (owner_id, id)`. In Django such
a link is a `ForeignObject` over the same pair of columns, so the ORM's joins name the owner too.

What a two-column `ForeignObject` does not do like a ForeignKey (Django 6.1, checked):
- `exclude()` / `~Q()` across a reverse link (`memberships__…`, `successors__…`) builds its
  NOT EXISTS on the owner column alone and returns wrong rows: write
  `~Exists(Model.objects.filter(owner_id=OuterRef("owner_id"), <column>=OuterRef("id"), …))`;
- `annotate(Count(…))` over a join groups by `id` alone, which PostgreSQL refuses now that the key
  is (owner_id, id): count in a subquery (`ThreadQuerySet.owned_with_counts`);
- filter, update and `values()` by the link itself want the pair: use the `<column>` field
  (`predecessor_id=…`, `memory_id__in=…`).
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.db import models
from django.db.models.fields.related_descriptors import ForwardManyToOneDescriptor


def tenant_owner(related_name: str) -> models.ForeignKey:
    """The owner column of a tenant table. No index of its own: the primary key (owner_id, id)
    leads with it."""
    return models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.PROTECT,
        related_name=related_name,
        db_index=False,
    )


class _SameOwnerDescriptor(ForwardManyToOneDescriptor):
    def __set__(self, instance: models.Model, value: models.Model | None) -> None:
        if value is None:
            # A plain ForeignObject would clear every column of the link, the owner included.
            for local, _remote in self.field.related_fields:
                if local.name != "owner":
                    setattr(instance, local.attname, None)
            self.field.set_cached_value(instance, None)
            return
        # getattr, not __dict__: a row loaded without its owner (.only()/.defer()) loads it here
        # rather than skipping the check.
        owner_id = getattr(instance, "owner_id", None)
        if owner_id is not None and value.owner_id != owner_id:
            raise ValueError(
                f"{instance._meta.object_name}.{self.field.name} must be a row of the same owner"
            )
        super().__set__(instance, value)


class SameOwnerLink(models.ForeignObject):
    """A link to another row of the same tenant. Assigning it never moves the row to another
    owner: None clears only the link's own column, and a row of another owner is refused."""

    forward_related_accessor_class = _SameOwnerDescriptor


def same_owner_link(to: str | type[models.Model], column: str, **options: Any) -> SameOwnerLink:
    """`(owner, column) -> (owner, id)` of `to`. Not serialized (dumpdata/loaddata): its columns,
    `owner` and `column`, are, and the link itself would be written as the row's __str__."""
    return SameOwnerLink(
        to, from_fields=["owner", column], to_fields=["owner", "id"], serialize=False, **options
    )


# The instants Python's datetime (and so psycopg) can hold, in UTC. A timestamptz column holds far
# more (up to year 294276, and 'infinity'), and psycopg refuses to read such a value back. Inputs
# are bounded tighter (memories.bounds.clean_datetime); rows stored before that bound existed
# are read clamped to this range instead of failing every read that meets them.
READABLE_MIN = "0001-01-01 00:00:00+00"
READABLE_MAX = "9999-12-31 23:59:59.999999+00"


def readable_instant_sql(column: str) -> str:
    """SQL for `column` clamped to the readable range (connections run in UTC). CASE, not
    LEAST/GREATEST, which would turn NULL into a bound."""
    low, high = f"'{READABLE_MIN}'::timestamptz", f"'{READABLE_MAX}'::timestamptz"
    return (
        f"CASE WHEN {column} > {high} THEN {high} WHEN {column} < {low} THEN {low} "
        f"ELSE {column} END"
    )


class ReadableDateTimeField(models.DateTimeField):
    """A DateTimeField whose every ORM read is clamped to the readable range
    (`readable_instant_sql`). The same column type and migrations as a DateTimeField."""

    def select_format(self, compiler, sql: str, params):
        sql, params = super().select_format(compiler, sql, params)
        return readable_instant_sql(sql), params

    def deconstruct(self):
        name, _path, args, kwargs = super().deconstruct()
        return name, "django.db.models.DateTimeField", args, kwargs
