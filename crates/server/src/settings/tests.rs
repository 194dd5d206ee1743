use super::*;

fn set(key: &str, value: &str) -> Override {
    Override {
        key: key.into(),
        value: value.into(),
        source: format!("--{}", key.replace('_', "-")),
    }
}

fn load(file: &str, overrides: &[Override]) -> Result<DaemonConfig> {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("telestore.toml");
    std::fs::write(&p, file).unwrap();
    DaemonConfig::load(Some(&p), overrides)
}

#[test]
fn the_defaults_are_the_layers_own() {
    let cfg = DaemonConfig::default();
    cfg.validate().unwrap();
    let (o, e) = (cfg.engine_options().unwrap(), Options::default());
    assert_eq!(o.flush_threshold_bytes, e.flush_threshold_bytes);
    assert_eq!(o.memstore_global_bytes, e.memstore_global_bytes);
    assert_eq!(o.compaction_threads, e.compaction_threads);
    assert_eq!(o.subcompactions, e.subcompactions);
    assert_eq!(o.background_nice, e.background_nice);
    assert_eq!(o.background_io_priority, e.background_io_priority);
    assert_eq!(
        o.compaction_debt_slowdown_bytes,
        e.compaction_debt_slowdown_bytes
    );
    assert_eq!(o.compaction_debt_stop_bytes, e.compaction_debt_stop_bytes);
    assert_eq!(o.readahead_new_files_bytes, e.readahead_new_files_bytes);
    assert_eq!(o.latest_cache_devices, e.latest_cache_devices);
    let (q, d) = (cfg.query_limits(), QueryLimits::default());
    assert_eq!(
        (
            q.timeout,
            q.concurrent_max,
            q.queue_wait,
            q.memory_bytes,
            q.spill_bytes
        ),
        (
            d.timeout,
            d.concurrent_max,
            d.queue_wait,
            d.memory_bytes,
            d.spill_bytes
        )
    );
    let (s, d) = (cfg.server_config().unwrap(), ServerConfig::default());
    assert_eq!(
        (
            s.max_inflight_bytes,
            s.connections_max,
            s.header_timeout,
            s.metrics_public
        ),
        (
            d.max_inflight_bytes,
            d.connections_max,
            d.header_timeout,
            d.metrics_public
        )
    );
    assert_eq!(s.device_tag, d.device_tag);
    assert_eq!(s.flight_listen, Some(([127, 0, 0, 1], 7072).into()));
}

#[test]
fn every_setting_is_documented_once_with_a_flag_of_its_own() {
    let mut seen = std::collections::HashSet::new();
    for s in SETTINGS {
        assert!(seen.insert(s.key), "{} declared twice", s.key);
        assert!(s.text().len() > 20, "{} has no documentation", s.key);
        assert!(!s.default_text().is_empty(), "{}", s.key);
        let cfg = DaemonConfig::default();
        if let Some((lo, hi)) = s.range {
            assert!(lo <= hi, "{}", s.key);
            let v = cfg.value_text(s.key);
            assert!(
                v == "unset" || (lo..=hi).contains(&v.parse::<i64>().unwrap()),
                "{}",
                s.key
            );
        }
    }
    assert_eq!(
        setting("flush_threshold_mib").unwrap().flag(),
        "--flush-threshold-mib"
    );
    assert_eq!(setting("dir").unwrap().env(), "TELESTORE_DIR");
}

#[test]
fn each_layer_overrides_the_one_below() {
    let file = "flush_threshold_mib = 32\nmemstore_global_mib = \"1GiB\"\ndevice_tag = \"host\"\n";
    let cfg = load(file, &[]).unwrap();
    assert_eq!(cfg.flush_threshold_mib, ByteSize::mib(32));
    assert_eq!(cfg.memstore_global_mib, ByteSize(1 << 30));
    assert_eq!(cfg.device_tag, "host");
    let cfg = load(
        file,
        &[
            set("flush_threshold_mib", "16"),
            set("device_tag", "truck"),
            Override::parse_set("flush_threshold_mib = 8MiB").unwrap(),
        ],
    )
    .unwrap();
    assert_eq!(
        cfg.flush_threshold_mib,
        ByteSize::mib(8),
        "--set comes last"
    );
    assert_eq!(cfg.device_tag, "truck");
    assert_eq!(
        cfg.memstore_global_mib,
        ByteSize(1 << 30),
        "kept from the file"
    );
    let o = cfg.engine_options().unwrap();
    assert_eq!(o.flush_threshold_bytes, 8 << 20);
}

#[test]
fn an_override_is_typed_by_the_setting_it_sets() {
    let cfg = DaemonConfig::load(
        None,
        &[
            set("device_tag", "123"),
            set("token", "true"),
            set("metrics_public", "false"),
            set("flight_listen", "off"),
            set("listen", "0.0.0.0:9000"),
            set("compaction_threads", "0"),
        ],
    )
    .unwrap();
    assert_eq!(cfg.device_tag, "123");
    assert_eq!(cfg.token.as_deref(), Some("true"));
    assert!(!cfg.metrics_public);
    assert_eq!(cfg.flight_listen, Listen::Off);
    assert_eq!(cfg.listen, ([0, 0, 0, 0], 9000).into());
    assert_eq!(cfg.compaction_threads, Some(0));
}

#[test]
fn a_table_key_keeps_the_rest_of_the_files_table() {
    let file = "[mqtt]\nurl = \"mqtt://a:1883\"\nclient_id = \"c1\"\n";
    let cfg = load(file, &[set("mqtt.url", "mqtt://b:1883")]).unwrap();
    let m = cfg.mqtt.unwrap();
    assert_eq!(
        (m.url.as_str(), m.client_id.as_str()),
        ("mqtt://b:1883", "c1")
    );
    let cfg = DaemonConfig::load(None, &[set("mqtt.url", "mqtt://c")]).unwrap();
    assert_eq!(cfg.mqtt, Some(MqttConfig::new("mqtt://c")));
}

#[test]
fn mistakes_name_the_setting_and_where_it_came_from() {
    let err = |r: Result<DaemonConfig>| match r {
        Err(e @ Error::InvalidInput { .. }) => e.to_string(),
        other => panic!("expected InvalidInput, got {other:?}"),
    };
    let e = err(DaemonConfig::load(None, &[set("background_nice", "25")]));
    assert!(e.contains("background_nice") && e.contains("0..=19"), "{e}");
    let e = err(DaemonConfig::load(
        None,
        &[set("flush_threshold_mib", "lots")],
    ));
    assert!(
        e.contains("--flush-threshold-mib") && e.contains("lots"),
        "{e}"
    );
    let e = err(DaemonConfig::load(
        None,
        &[Override::parse_set("flush_treshold_mib=1").unwrap()],
    ));
    assert!(
        e.contains("flush_treshold_mib") && e.contains("no such setting"),
        "{e}"
    );
    let e = err(DaemonConfig::load(None, &[set("mqtt", "mqtt://x")]));
    assert!(e.contains("is a table"), "{e}");
    assert!(Override::parse_set("no-equals").is_err());
    let e = err(load("flush_treshold_mib = 1\n", &[]));
    assert!(
        e.contains("telestore.toml") && e.contains("flush_treshold_mib") && e.contains("line 1"),
        "{e}"
    );
    let e = err(load("[tls]\ncert = \"a\"\n", &[]));
    assert!(e.contains("key"), "{e}");
    let e = err(DaemonConfig::load(
        None,
        &[
            set("flush_threshold_mib", "128"),
            set("memstore_global_mib", "64"),
        ],
    ));
    assert!(e.contains("memstore_global"), "{e}");
}

#[test]
fn sizes_in_the_generated_docs_read_back() {
    let md = markdown();
    assert!(md.contains("| `flush_threshold_mib` | `--flush-threshold-mib SIZE`<br>`TELESTORE_FLUSH_THRESHOLD_MIB` | `64MiB` |"), "{md}");
    assert!(md.contains("Range 0..=19."), "{md}");
    for s in SETTINGS {
        assert!(md.contains(&format!("| `{}` |", s.key)), "{}", s.key);
    }
}

#[test]
fn tables_created_on_first_write_take_the_auto_create_settings() {
    use telestore_engine::schema::{Compression, TableOptions};
    let cfg = load("", &[]).unwrap();
    let d = cfg.auto_create_options().unwrap();
    assert_eq!(
        d,
        Some(TableOptions::default()),
        "on, with a table's defaults"
    );
    assert_eq!(cfg.server_config().unwrap().auto_create, d);
    let file = "auto_create_ttl = \"30d\"\nauto_create_compression = \"snappy\"\nauto_create_regions = 4\n";
    let o = load(file, &[])
        .unwrap()
        .auto_create_options()
        .unwrap()
        .unwrap();
    assert_eq!(o.ttl_ms, Some(30 * 86_400_000));
    assert_eq!(o.compression, Compression::Snappy);
    assert_eq!(o.regions, 4);
    let off = load("", &[set("auto_create", "false")]).unwrap();
    assert_eq!(off.auto_create_options().unwrap(), None);
    for (key, bad) in [
        ("auto_create_compression", "lz5"),
        ("auto_create_encoding", "parquet"),
        ("auto_create_ttl", "soon"),
    ] {
        for on in ["true", "false"] {
            let cfg = load("", &[set(key, bad), set("auto_create", on)]).unwrap();
            let e = cfg.auto_create_options().unwrap_err().to_string();
            assert!(e.contains(bad) && e.contains(key), "{key}={bad}: {e}");
        }
    }
}
