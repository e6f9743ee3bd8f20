import pytest

from tests.factories import UserFactory


@pytest.fixture
def tenant(db):
    return UserFactory()


@pytest.fixture
def other_tenant(db):
    return UserFactory()


@pytest.fixture
def staff_member(db):
    return UserFactory(is_staff=True)
