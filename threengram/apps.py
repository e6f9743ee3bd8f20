from django.apps import AppConfig


class ThreengramConfig(AppConfig):
    """The wiring package as an app only so that its configuration checks are registered."""

    name = "threengram"
    verbose_name = "threengram wiring"

    def ready(self) -> None:
        from threengram import checks  # noqa: F401  (registers the system checks)
