//! What the tests that drive real tools share: a Python virtualenv under the target folder
//! with the packages they need from PyPI, made once.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The `bin` folder of a virtualenv that has `packages` installed (made, or completed, on
/// first use).
pub fn python_tools(packages: &[&str]) -> PathBuf {
    let venv = Path::new(env!("CARGO_TARGET_TMPDIR")).join("tools-venv");
    let bin = venv.join("bin");
    if !bin.join("python").exists() {
        let made = Command::new("python3")
            .args(["-m", "venv"])
            .arg(&venv)
            .status()
            .expect("python3 (to install test tools from PyPI)");
        assert!(made.success(), "python3 -m venv failed");
    }
    let missing: Vec<&str> = packages
        .iter()
        .copied()
        .filter(|p| {
            !Command::new(bin.join("pip"))
                .args(["show", "--quiet", p])
                .stderr(std::process::Stdio::null())
                .stdout(std::process::Stdio::null())
                .status()
                .is_ok_and(|s| s.success())
        })
        .collect();
    if !missing.is_empty() {
        let installed = Command::new(bin.join("pip"))
            .args(["install", "--quiet"])
            .args(&missing)
            .status()
            .expect("pip");
        assert!(installed.success(), "pip install {missing:?} failed");
    }
    bin
}
