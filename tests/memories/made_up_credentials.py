"""A made-up value in each credential format memories.credentials refuses, by the kind a refusal
names. Spelled in pieces so that no secret scanner (of this repository, or of a push) takes the
source for a leak."""

import zlib

BASE62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"


def github_token(prefix: str, random_part: str) -> str:
    """A token as GitHub issues them: `prefix` ("ghp_"...), 30 random characters, then their
    CRC32 in base62, padded to 6 with zeros (GitHub's blog post on its token formats)."""
    assert len(random_part) == 30
    checksum, digits = zlib.crc32(random_part.encode()), ""
    while checksum:
        checksum, digit = divmod(checksum, 62)
        digits = BASE62[digit] + digits
    return prefix + random_part + digits.rjust(6, "0")


PEM_BODY = "MIIBPtYgjmUhBel31iEl2hpChYgCfrL1spNxnyVmihA/2O76UMFxFkM/R5Kjp1vR"
CREDENTIALS = {
    "a private key (PEM or OpenPGP block)": (
        "-----BEGIN RSA PRIVATE KEY-----\n" + PEM_BODY + "\n-----END RSA PRIVATE KEY-----"
    ),
    "an AWS access key id": "AKIA" + "Y34FZKBOKMUTVV7A",
    "a GitHub token": github_token("ghp_", "aB3dE5gH7jK9mN1pQ3sT5vW7yZ9bC1"),
    "a Slack token": "xoxb-" + "781236542736-2364535789652-ojfljoQoaF1LlqsajAIxNKu8",
    "a Stripe live secret key": "sk_live_" + "z63FfkCzJr4i0B3JrTAwR4y9",
    "a Google API key": "AIza" + "Syt_1fjORS-6ilI8ihN5KXSc7Tvo-hBKqFY",
    "an OpenAI API key": "sk-proj-" + "Sevz" * 15 + "T3Blbk" + "FJ" + "dD9F" * 15,
    "an Anthropic API key": "sk-ant-api03-" + "Ab1-_" * 18 + "xyzAA",
}
