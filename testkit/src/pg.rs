//! A private PostgreSQL server for tests: `initdb` into a fresh temporary
//! directory, `pg_ctl start` on a free loopback port (and a private socket
//! directory), stopped and deleted on drop.
//!
//! The binaries are found through `pg_config --bindir`, then
//! `/usr/lib/postgresql/*/bin`, then `PATH`. `initdb` refuses to run as
//! root, so as root the server runs as the `postgres` user (Debian's
//! package creates it), else as `nobody`, through `runuser`.
//!
//! Every test that starts one is `#[ignore = "needs PostgreSQL: run
//! ./test"]`; run (`./test` installs PostgreSQL and includes ignored tests)
//! without PostgreSQL, [`PgServer::start`] fails the test, naming the fix.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};

pub struct PgServer {
    dir: PathBuf,
    bin: PathBuf,
    user: Option<String>,
    port: u16,
}

fn bin_dir() -> Option<PathBuf> {
    let has = |d: &Path| d.join("initdb").is_file() && d.join("pg_ctl").is_file();
    if let Ok(o) = Command::new("pg_config").arg("--bindir").output() {
        let d = PathBuf::from(String::from_utf8_lossy(&o.stdout).trim());
        if o.status.success() && has(&d) {
            return Some(d);
        }
    }
    let mut versions: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
        .map(|rd| rd.flatten().map(|e| e.path().join("bin")).collect())
        .unwrap_or_default();
    versions.sort();
    if let Some(d) = versions.into_iter().rev().find(|d| has(d)) {
        return Some(d);
    }
    std::env::var_os("PATH").and_then(|p| std::env::split_paths(&p).find(|d| has(d)))
}

fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free loopback port")
}

impl PgServer {
    /// Whether the server binaries (`initdb`, `pg_ctl`) are installed.
    pub fn installed() -> bool {
        bin_dir().is_some()
    }

    /// Starts a server. Panics, naming the fix, when PostgreSQL is not
    /// installed.
    pub fn start() -> PgServer {
        let Some(bin) = bin_dir() else {
            panic!(
                "needs PostgreSQL: initdb and pg_ctl not found via pg_config, /usr/lib/postgresql/*/bin or PATH. \
                 Run ./test, which installs it (scripts/provision/apt.sh)"
            );
        };
        static N: AtomicU32 = AtomicU32::new(0);
        let dir = std::env::temp_dir().join(format!(
            "ais-pg-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::SeqCst)
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("sock")).expect("create the server's directory");
        let user = is_root().then(|| {
            let postgres = Command::new("id")
                .arg("postgres")
                .output()
                .is_ok_and(|o| o.status.success());
            if postgres { "postgres" } else { "nobody" }.to_string()
        });
        if let Some(u) = &user {
            let ok = Command::new("chown")
                .args(["-R", u])
                .arg(&dir)
                .status()
                .is_ok_and(|s| s.success());
            assert!(ok, "chown {} to {u}", dir.display());
            // The temporary directory's parents must be traversable.
            let _ = Command::new("chmod")
                .arg("o+x")
                .arg(std::env::temp_dir())
                .status();
        }
        let server = PgServer {
            dir,
            bin,
            user,
            port: free_port(),
        };
        let data = server.dir.join("data");
        server.run(
            "initdb",
            &[
                "-D".as_ref(),
                data.as_os_str(),
                "-A".as_ref(),
                "trust".as_ref(),
                "-U".as_ref(),
                "ais".as_ref(),
                "-E".as_ref(),
                "UTF8".as_ref(),
                "--locale=C".as_ref(),
                "--no-sync".as_ref(),
            ],
        );
        let opts = format!(
            "-p {} -k {} -c listen_addresses=127.0.0.1 -c max_connections=200",
            server.port,
            server.dir.join("sock").display()
        );
        server.run(
            "pg_ctl",
            &[
                "start".as_ref(),
                "-w".as_ref(),
                "-D".as_ref(),
                data.as_os_str(),
                "-l".as_ref(),
                server.dir.join("log").as_os_str(),
                "-o".as_ref(),
                opts.as_ref(),
            ],
        );
        server
    }

    fn command(&self, tool: &str) -> Command {
        let exe = self.bin.join(tool);
        match &self.user {
            Some(u) => {
                let mut c = Command::new("runuser");
                c.args(["-u", u, "--"]).arg(exe);
                c
            }
            None => Command::new(exe),
        }
    }

    fn run(&self, tool: &str, args: &[&std::ffi::OsStr]) {
        let out = self
            .command(tool)
            .args(args)
            .current_dir(&self.dir)
            .output()
            .unwrap_or_else(|e| panic!("cannot run {tool}: {e}"));
        assert!(
            out.status.success(),
            "{tool} failed: {}\n{}\nlog: {}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr),
            std::fs::read_to_string(self.dir.join("log")).unwrap_or_default()
        );
    }

    /// The URL of the server's `postgres` database.
    pub fn url(&self) -> String {
        format!("postgres://ais@127.0.0.1:{}/postgres", self.port)
    }

    /// The URL of a new, empty database `name` on the server.
    pub fn database(&self, name: &str) -> String {
        self.run(
            "createdb",
            &[
                "-h".as_ref(),
                "127.0.0.1".as_ref(),
                "-p".as_ref(),
                self.port.to_string().as_ref(),
                "-U".as_ref(),
                "ais".as_ref(),
                name.as_ref(),
            ],
        );
        format!("postgres://ais@127.0.0.1:{}/{name}", self.port)
    }

    /// Runs SQL with `psql` against `url`; its output.
    pub fn psql(&self, url: &str, sql: &str) -> String {
        let out = self
            .command("psql")
            .args([url, "-XAtq", "-v", "ON_ERROR_STOP=1", "-c", sql])
            .current_dir(&self.dir)
            .output()
            .expect("run psql");
        assert!(
            out.status.success(),
            "psql failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    }
}

impl Drop for PgServer {
    fn drop(&mut self) {
        let data = self.dir.join("data");
        let _ = self
            .command("pg_ctl")
            .args(["stop", "-m", "immediate", "-D"])
            .arg(&data)
            .current_dir(&self.dir)
            .output();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
