from django.apps import AppConfig


class MemoriesConfig(AppConfig):
    name = "memories"
    verbose_name = "Memories"

    def ready(self) -> None:
        # Registers the connection_created receiver of row-level security (DATABASE_APP_ROLE).
        from memories import tenancy  # noqa: F401
