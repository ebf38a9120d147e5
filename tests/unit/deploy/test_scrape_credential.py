"""The site's credentials (scrape, API) and metrics key: made once, private, hashes kept in step,
hostile files refused."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import bcrypt
import pytest

from vigil.installer.deploy.credentials import (
    API_USER,
    SCRAPE_USER,
    CredentialError,
    api_credential,
    metrics_key,
    read_password,
    scrape_credential,
)


def test_made_once_private_and_the_hashes_match_the_password(tmp_path: Path) -> None:
    cred = scrape_credential(tmp_path)
    assert cred is not None
    assert cred.made == ("scrape.password", "scrape.password.bcrypt", "scrape.password.sha256")
    password = cred.password_file.read_bytes().strip()
    assert len(password) == 40 and password.isalnum()
    assert cred.password_file.stat().st_mode & 0o777 == 0o600
    assert (tmp_path / "secrets").stat().st_mode & 0o777 == 0o700
    assert bcrypt.checkpw(password, cred.bcrypt_file.read_bytes().strip())
    assert cred.sha256_file.read_text().strip() == hashlib.sha256(password).hexdigest()
    assert cred.extravars()["vigil_scrape_user"] == SCRAPE_USER == "vigil-scrape"

    files = {p: p.read_bytes() for p in (cred.password_file, cred.bcrypt_file, cred.sha256_file)}
    again = scrape_credential(tmp_path)
    assert again is not None and again.made == ()
    assert {p: p.read_bytes() for p in files} == files  # a rerun changes no exporter's configuration
    # two sites never share a password
    other = scrape_credential(tmp_path / "other")
    assert other is not None and other.password_file.read_bytes() != files[cred.password_file]


def test_a_new_password_remakes_both_hashes(tmp_path: Path) -> None:
    cred = scrape_credential(tmp_path)
    assert cred is not None
    cred.password_file.write_text("a-password-the-site-chose-42\n")
    again = scrape_credential(tmp_path)
    assert again is not None and again.made == ("scrape.password.bcrypt", "scrape.password.sha256")
    assert bcrypt.checkpw(b"a-password-the-site-chose-42", again.bcrypt_file.read_bytes().strip())
    assert (
        again.sha256_file.read_text().strip() == hashlib.sha256(b"a-password-the-site-chose-42").hexdigest()
    )
    # a damaged hash is remade, not trusted
    again.bcrypt_file.write_text("not a bcrypt hash\n")
    assert scrape_credential(tmp_path).made == ("scrape.password.bcrypt",)  # type: ignore[union-attr]


def test_a_check_run_makes_nothing(tmp_path: Path) -> None:
    assert scrape_credential(tmp_path, create=False) is None
    assert not (tmp_path / "secrets").exists()
    scrape_credential(tmp_path)
    looked = scrape_credential(tmp_path, create=False)
    assert looked is not None and looked.made == ()


def test_hostile_files_are_refused_in_one_line_and_nothing_is_written_through_them(tmp_path: Path) -> None:
    secrets_dir = tmp_path / "secrets"
    secrets_dir.mkdir(mode=0o700)
    target = tmp_path / "elsewhere"
    target.write_text("a-password-somebody-planted\n")
    os.symlink(target, secrets_dir / "scrape.password")
    with pytest.raises(CredentialError, match=r"scrape\.password: cannot be read.*a link"):
        scrape_credential(tmp_path)
    (secrets_dir / "scrape.password").unlink()

    (secrets_dir / "scrape.password").write_text("open-to-everyone-password\n")
    (secrets_dir / "scrape.password").chmod(0o644)
    with pytest.raises(CredentialError, match=r"is open to others \(mode 644\); chmod 600 it"):
        scrape_credential(tmp_path)
    (secrets_dir / "scrape.password").chmod(0o600)

    (secrets_dir / "scrape.password").write_text("short\n")
    with pytest.raises(CredentialError, match="12 or more printable characters"):
        scrape_credential(tmp_path)
    (secrets_dir / "scrape.password").write_text("x" * 5000)
    with pytest.raises(CredentialError, match="larger than 4096 bytes"):
        scrape_credential(tmp_path)
    (secrets_dir / "scrape.password").unlink()

    os.mkfifo(secrets_dir / "scrape.password")  # must not block
    with pytest.raises(CredentialError, match="not a regular file"):
        scrape_credential(tmp_path)
    (secrets_dir / "scrape.password").unlink()

    scrape_credential(tmp_path)
    bcrypt_file = secrets_dir / "scrape.password.bcrypt"
    bcrypt_file.unlink()
    os.symlink(target, bcrypt_file)
    with pytest.raises(CredentialError, match=r"scrape\.password\.bcrypt: cannot be read"):
        scrape_credential(tmp_path)
    assert target.read_text() == "a-password-somebody-planted\n"


def test_a_secrets_directory_that_is_a_link_is_refused(tmp_path: Path) -> None:
    (tmp_path / "real").mkdir(mode=0o700)
    home = tmp_path / "home"
    home.mkdir()
    os.symlink(tmp_path / "real", home / "secrets")
    with pytest.raises(CredentialError, match="is a link"):
        scrape_credential(home)
    assert list((tmp_path / "real").iterdir()) == []


def test_the_api_credential_is_its_own_password_under_the_same_rules(tmp_path: Path) -> None:
    api = api_credential(tmp_path)
    scrape = scrape_credential(tmp_path)
    assert api is not None and scrape is not None
    assert api.user == API_USER == "vigil-api" and api.kind == "api"
    assert api.made == ("api.password", "api.password.bcrypt", "api.password.sha256")
    assert api.password_file.read_bytes() != scrape.password_file.read_bytes()
    assert set(api.extravars()) == {
        "vigil_api_user",
        "vigil_api_password_file",
        "vigil_api_bcrypt_file",
        "vigil_api_sha256_file",
    }
    assert read_password(tmp_path, "api") == api.password_file.read_text().strip()
    api.password_file.chmod(0o640)
    with pytest.raises(CredentialError, match=r"api\.password: is open to others"):
        read_password(tmp_path, "api")
    assert read_password(tmp_path / "none", "api") is None


def test_the_metrics_key_is_made_once_private_and_hostile_files_are_refused(tmp_path: Path) -> None:
    assert metrics_key(tmp_path, create=False) is None
    made = metrics_key(tmp_path)
    assert made is not None and made[1] is True
    path = made[0]
    assert path == tmp_path / "secrets" / "metrics.key" and path.stat().st_mode & 0o777 == 0o600
    key = path.read_bytes()
    assert metrics_key(tmp_path) == (path, False) and path.read_bytes() == key
    assert metrics_key(tmp_path, create=False) == (path, False)

    path.write_text("not a key!\n")
    with pytest.raises(CredentialError, match="12 or more letters and digits"):
        metrics_key(tmp_path)
    path.unlink()
    target = tmp_path / "planted"
    target.write_text("plantedkey0123456789\n")
    os.symlink(target, path)
    with pytest.raises(CredentialError, match=r"metrics\.key: cannot be read.*a link"):
        metrics_key(tmp_path)
    assert target.read_text() == "plantedkey0123456789\n"


def test_a_secrets_directory_others_may_write_is_refused_one_they_may_read_is_closed(tmp_path: Path) -> None:
    secrets = tmp_path / "secrets"
    secrets.mkdir()
    secrets.chmod(0o777)
    with pytest.raises(CredentialError, match="secrets: is writable by others"):
        scrape_credential(tmp_path)
    with pytest.raises(CredentialError, match="secrets: is writable by others"):
        metrics_key(tmp_path)
    assert list(secrets.iterdir()) == []
    secrets.chmod(0o755)
    assert metrics_key(tmp_path) is not None and scrape_credential(tmp_path) is not None
    assert secrets.stat().st_mode & 0o777 == 0o700
