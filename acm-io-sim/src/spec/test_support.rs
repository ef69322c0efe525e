//! Description snippets the unit tests of several files share.

pub(super) const DEMO: &str = include_str!("../../../testdata/fabrics/demo.toml");

/// One host "a" with one HCA and one port whose keys are `port` (line 7 on).
pub(super) fn one_port(port: &str) -> String {
    format!(
        "[[hosts]]\nname = \"a\"\n[[hosts.hcas]]\nname = \"mlx5_0\"\nguid = 0x100\n\
         [[hosts.hcas.ports]]\n{port}\n"
    )
}

/// [`one_port`] with LID 1 (line 7) and `extra` from line 8.
pub(super) fn minimal(extra: &str) -> String {
    one_port(&format!("lid = 1\n{extra}"))
}
