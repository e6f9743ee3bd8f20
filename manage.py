#!/usr/bin/env python
"""Django's command-line utility for administrative tasks."""

import os
import sys


def main() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "threengram.settings")
    try:
        from django.core.exceptions import ImproperlyConfigured
        from django.core.management import execute_from_command_line
    except ModuleNotFoundError as missing:
        if missing.name != "django":
            raise
        # The README's quick start installs into .venv without activating it: a plain
        # `python manage.py` then runs another interpreter.
        sys.exit(
            f"Django is not installed for {sys.executable}: run .venv/bin/python manage.py "
            "(python3 scripts/dev.py serve makes .venv), or activate the virtualenv that "
            "`pip install -e .` installed into."
        )

    try:
        execute_from_command_line(sys.argv)
    except ImproperlyConfigured as refused:
        # The settings name the variable and its limit: a sentence for the person (a .env
        # edited by hand, `scripts/dev.py serve`), not a traceback.
        sys.exit(str(refused))
    except KeyboardInterrupt:  # Ctrl-C: stopped, as asked
        sys.exit(130)


if __name__ == "__main__":
    main()
