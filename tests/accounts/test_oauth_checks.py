from accounts.oauth_checks import check_issuer_is_https, check_issuer_matches_public_origin


def test_issuer_must_be_exactly_the_public_origin(settings):
    assert check_issuer_matches_public_origin() == []
    settings.OAUTH2_PROVIDER = {**settings.OAUTH2_PROVIDER, "OIDC_ISS_ENDPOINT": "https://x.test/"}
    [error] = check_issuer_matches_public_origin()
    assert error.id == "accounts.E101"


def test_deploy_requires_an_https_issuer(settings):
    settings.PUBLIC_BASE_URL = "http://memory.example.com"
    [error] = check_issuer_is_https()
    assert error.id == "accounts.E102"
    settings.PUBLIC_BASE_URL = "https://memory.example.com"
    assert check_issuer_is_https() == []
