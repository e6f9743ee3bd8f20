#!/usr/bin/env python
"""Django's command-line utility for administrative tasks."""

import os
import sys


def main() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "threengram.settings")
    from django.core.exceptions import ImproperlyConfigured
    from django.core.management import execute_from_command_line

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
