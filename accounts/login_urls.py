"""accounts:login for the OAuth flow (settings.LOGIN_URL); the account pages add the rest."""

from django.urls import path

from accounts.views_login import LoginView

app_name = "accounts"

urlpatterns = [
    path("login/", LoginView.as_view(), name="login"),
]
