# An erased account is never active: the database refuses it whatever writes the row.

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('accounts', '0003_log_in_by_name_in_any_case'),
    ]

    operations = [
        # An erased account reactivated in the admin before this constraint (its page then took
        # a tick of Active) is deactivated again, rather than the migration failing on it.
        migrations.RunSQL(
            "UPDATE accounts_user SET is_active = false"
            " WHERE erased_at IS NOT NULL AND is_active",
            reverse_sql=migrations.RunSQL.noop,
        ),
        migrations.AddConstraint(
            model_name='user',
            constraint=models.CheckConstraint(
                condition=models.Q(('erased_at__isnull', True), ('is_active', False), _connector='OR'),
                name='accounts_user_erased_is_inactive',
                violation_error_message='An erased account cannot be made active.',
            ),
        ),
    ]
