from django.urls import path

from accounts import views

app_name = "accounts"

urlpatterns = [
    path("", views.home, name="home"),
    path("signup/", views.signup, name="signup"),
    path("login/", views.LoginView.as_view(), name="login"),
    path("logout/", views.LogoutView.as_view(), name="logout"),
    path("account/", views.account, name="account"),
    path("account/email/forget/", views.forget_email, name="forget_email"),
    path("account/password/", views.PasswordChangeView.as_view(), name="password_change"),
    path(
        "account/password/done/",
        views.PasswordChangeDoneView.as_view(),
        name="password_change_done",
    ),
    path("account/delete/", views.delete_account, name="delete_account"),
    path("account/deleted/", views.account_deleted, name="account_deleted"),
    path("apps/", views.connected_apps, name="connected_apps"),
    path("apps/<int:pk>/revoke/", views.revoke_app, name="revoke_app"),
    path("memories/", views.memory_list, name="memories"),
    path("memories/export.json", views.export_memories, name="export_memories"),
    path("memories/<str:memory_id>/", views.memory_detail, name="memory_detail"),
]
