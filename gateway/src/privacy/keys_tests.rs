use super::*;

fn store() -> (UserKeys, PathBuf) {
    let dir = std::env::temp_dir().join(format!("eventgw-keys-{}", uuid::Uuid::new_v4()));
    (UserKeys::open(&dir).expect("store"), dir)
}

#[test]
fn keys_are_derived_so_new_users_store_nothing() {
    let (keys, dir) = store();
    assert_eq!(keys.stored_files(), 1, "one master key");
    let first = keys.encryption_key("u1").expect("derived");
    for i in 0..200 {
        keys.encryption_key(&format!("anon-{i}")).expect("derived");
    }
    assert_eq!(keys.stored_files(), 1, "users leave nothing behind");
    assert_eq!(keys.encryption_key("u1").expect("again"), first, "the same user, the same key");
    assert_ne!(keys.encryption_key("u2").expect("other").1, first.1);
    let again = UserKeys::open(&dir).expect("reopened");
    assert_eq!(again.encryption_key("u1").expect("after a restart"), first, "the master was kept, not remade");
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn rotation_keeps_old_values_readable_until_their_generation_is_retired() {
    let (keys, dir) = store();
    let old = keys.encrypt("u1", b"Ada").expect("sealed");
    assert!(old.starts_with("enc:v2:1:"), "{old}");
    assert_eq!(keys.rotate().expect("rotated"), 2);
    let new = keys.encrypt("u1", b"Ada").expect("sealed");
    assert!(new.starts_with("enc:v2:2:"), "{new}");
    assert_eq!(keys.decrypt("u1", &old).expect("old generation"), b"Ada");
    assert!(keys.decrypt("u2", &new).is_err(), "bound to its user");
    std::fs::remove_file(dir.join("master/1")).expect("retired");
    keys.reload().expect("reloaded");
    assert!(matches!(keys.decrypt("u1", &old), Err(CryptoError::NoKey)), "retired with its generation");
    assert_eq!(keys.decrypt("u1", &new).expect("current"), b"Ada");
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn an_erased_user_is_unreadable_and_gets_a_fresh_key() {
    let (keys, dir) = store();
    let before = keys.encrypt("u1", b"Ada").expect("sealed");
    let other = keys.encrypt("u2", b"Bob").expect("sealed");
    assert!(keys.forget("u1").expect("erased"), "newly erased");
    assert!(!keys.forget("u1").expect("again"), "erasing twice keeps the first salt");
    assert!(keys.decrypt("u1", &before).is_err(), "erased");
    assert_eq!(keys.decrypt("u2", &other).expect("others untouched"), b"Bob");
    let after = keys.encrypt("u1", b"Ada again").expect("sealed");
    assert_eq!(keys.decrypt("u1", &after).expect("new consent, new key"), b"Ada again");
    assert_eq!(keys.stored_files(), 2, "a master and one erasure");
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn values_of_former_per_user_key_files_still_decrypt_until_forgotten() {
    let (keys, dir) = store();
    let key = [9u8; KEY_BYTES];
    std::fs::write(dir.join(user_file("u1")), key).expect("legacy key");
    let sealed = crypto::encrypt(&key, "u1", b"Ada");
    assert_eq!(keys.decrypt("u1", &sealed).expect("legacy"), b"Ada");
    keys.forget("u1").expect("erased");
    assert!(!dir.join(user_file("u1")).exists(), "the legacy file is deleted");
    assert!(keys.decrypt("u1", &sealed).is_err());
    let _ = std::fs::remove_dir_all(dir);
}
