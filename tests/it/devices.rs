//! The device registry: ids assigned once and never reused, tags fixed at
//! the first registration (a change is refused), control characters refused,
//! persisted through reopen and manifest rewrites, tag index queries.

use telestore::{Options, Store};

fn dev(name: &str, tags: &[(&str, &str)]) -> (String, Vec<(String, String)>) {
    (
        name.to_string(),
        tags.iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
    )
}

#[test]
fn registry_persists_and_answers_tag_queries() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b);
    {
        let s = Store::open(dir.path(), Options::default()).unwrap();
        let ids = s
            .register_devices(&[
                dev("a", &[("fleet", "east")]),
                dev("b", &[("fleet", "west")]),
                dev("a", &[("fleet", "east")]),
            ])
            .unwrap();
        (a, b) = (ids[0], ids[1]);
        assert_eq!(ids[2], a, "one name, one id");
        assert_ne!(a, b);
        // Same tags, or none: nothing new. Other tags: refused, whole.
        assert_eq!(
            s.register_devices(&[dev("a", &[("fleet", "east")]), dev("b", &[])])
                .unwrap(),
            vec![a, b]
        );
        let e = s
            .register_devices(&[
                dev("n", &[]),
                dev("b", &[("fleet", "east"), ("model", "x9")]),
            ])
            .unwrap_err()
            .to_string();
        assert!(e.contains("fleet=west") && e.contains("fixed"), "{e}");
        assert_eq!(s.device_id("n"), None, "a refused call registered a device");
        let east: Vec<u64> = s
            .devices(Some(("fleet", "east")))
            .iter()
            .map(|d| d.0)
            .collect();
        assert_eq!(east, vec![a]);
        assert_eq!(s.devices(Some(("fleet", "west"))).len(), 1);
        // Control characters cannot get into names or tags.
        for bad in [dev("bell\u{7}", &[]), dev("x", &[("k", "esc\u{1b}[2J")])] {
            let e = s.register_devices(&[bad]).unwrap_err().to_string();
            assert!(e.contains("control character"), "{e}");
        }
        s.register_devices(&[dev("b", &[("fleet", "west")])])
            .unwrap();
        s.close().unwrap();
    }
    let s = Store::open(dir.path(), Options::default()).unwrap();
    assert_eq!((s.device_id("a"), s.device_id("b")), (Some(a), Some(b)));
    assert_eq!(s.device(b).unwrap().tags.len(), 1);
    let c = s.register_devices(&[dev("c", &[])]).unwrap()[0];
    assert!(c > a && c > b, "ids are never reused");
    assert_eq!(s.devices(None).len(), 3);
    assert!(
        s.register_devices(&[dev("", &[])]).is_err(),
        "empty name accepted"
    );
    assert_eq!(s.devices(None).len(), 3);
}

/// A store written before control characters were refused may hold some
/// (the manifest format allows them): `telestore devices` escapes them.
#[test]
fn devices_prints_control_characters_escaped() {
    use std::sync::Arc;
    use telestore::io::StdBackend;
    use telestore_engine::manifest::{Manifest, Record};
    let dir = tempfile::tempdir().unwrap();
    Store::open(dir.path(), Options::default())
        .unwrap()
        .close()
        .unwrap();
    let mut m = Manifest::open(dir.path(), Arc::new(StdBackend)).unwrap();
    m.append(&[Record::Device {
        id: 1 << 40,
        name: "bell\u{7}\u{1b}[2J".into(),
        tags: vec![("fleet".into(), "e\u{1b}]0;x".into())],
    }])
    .unwrap();
    drop(m);
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_telestore"))
        .args(["devices", "--dir"])
        .arg(dir.path())
        .output()
        .unwrap();
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        !text.chars().any(|c| c.is_control() && c != '\n'),
        "{text:?}"
    );
    assert!(text.contains("bell\\u{7}\\u{1b}[2J"), "{text}");
    assert!(text.contains("fleet=e\\u{1b}]0;x"), "{text}");
}
