from django.db import migrations, models


class Migration(migrations.Migration):
    initial = True
    dependencies: list[tuple[str, str]] = []
    operations = [
        migrations.CreateModel(
            name="Order",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False)),
                ("email", models.CharField(max_length=200)),
                ("status", models.CharField(default="new", max_length=20)),
                ("fulfilled_by", models.CharField(blank=True, default="", max_length=200)),
            ],
        )
    ]
