//! Files from the wild (issue 63): a folder of crafted files (`scripts/hostile-files.py`:
//! forms that draw themselves, stream bombs, entity expansion, nesting, links out of the
//! folder and in a loop, a pipe) beside ordinary ones.

mod common;
use common::*;

/// The ordinary files are ingested; each crafted one is named with the limit it passed or
/// why it cannot be read; no link leads out of the folder (nothing of /etc is stored), a
/// loop is walked once, a pipe is never opened; the exit is 0 and no backtrace is printed.
///
/// `RAGCTX_WILD=full` (scripts/reliability) adds the slow files (a 10,000-page PDF, a DOCX
/// inflating to 1 GiB) and checks the budgets: the whole ingest in at most 300 s and 2.5 GB.
#[test]
fn crafted_files_cannot_take_ingest_down() {
    let full = std::env::var("RAGCTX_WILD").is_ok_and(|v| v == "full");
    let env = Env::new();
    let dir = env.dir.path().join("wild");
    let mut make = std::process::Command::new("python3");
    make.arg(repo().join("scripts/hostile-files.py"));
    if !full {
        make.arg("--quick");
    }
    let made = make.arg(&dir).status().expect("python3 runs");
    assert!(made.success());
    // A folder inside, and a link to it: read once, by its own path.
    std::fs::create_dir_all(dir.join("inside")).unwrap();
    std::fs::write(dir.join("inside/seeds.md"), "# Seeds\n\nSow the tomato seeds in March under glass.\n").unwrap();
    std::os::unix::fs::symlink("inside", dir.join("link-inside")).unwrap();

    for follow in [false, true] {
        let mut args = vec!["ingest", dir.to_str().unwrap()];
        if follow {
            args.push("--follow-links");
        }
        let started = std::time::Instant::now();
        // GNU time's peak: the ingest's, or a reader process's it waited for, whichever is larger.
        let peak = env.dir.path().join("peak");
        let out = if full {
            let mut c = std::process::Command::new("/usr/bin/time");
            c.arg("-f").arg("%M").arg("-o").arg(&peak).arg(env!("CARGO_BIN_EXE_ragctx"));
            c.arg("--data-dir").arg(env.data()).arg("--model-dir").arg(repo().join("models/all-MiniLM-L6-v2"));
            c.args(&args).output().expect("/usr/bin/time runs ragctx")
        } else {
            env.run(&args)
        };
        let seconds = started.elapsed().as_secs_f64();
        let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
        assert!(out.status.success(), "{stdout}\n{stderr}");
        assert!(!stderr.contains("panicked") && !stderr.contains("backtrace"), "{stderr}");
        let pdfs = if full { "pdf: 2 files, 10010 pages" } else { "pdf: 1 files, 10 pages" };
        assert!(stdout.contains(&format!("read docx: 2 files, 2 chunks; md: 2 files, 2 chunks; {pdfs}")), "{stdout}");
        if full {
            let line = stdout.lines().find(|l| l.contains("docx-bomb-1gib.docx")).unwrap_or_else(|| panic!("{stdout}"));
            assert!(line.contains("is larger than 64 MiB"), "{line}");
            let peak_mb = std::fs::read_to_string(&peak).unwrap().trim().parse::<u64>().unwrap() / 1024;
            println!(
                "RELIABILITY {{\"suite\": \"hostile files (ingest{})\", \"trials\": 1, \"panics\": 0, \"seconds\": {seconds:.1}, \"peak_mb\": {peak_mb}}}",
                if follow { " --follow-links" } else { "" }
            );
            assert!(seconds <= 300.0 && peak_mb <= 2_500, "{seconds} s, {peak_mb} MB");
        }
        for (file, why) in [
            ("form-draws-itself.pdf", "passed a limit: a form (object 4 0) draws itself"),
            ("forms-draw-each-other.pdf", "passed a limit: a form (object 4 0) draws itself"),
            ("forms-drawn-a-billion-times.pdf", "passed a limit: it draws forms more than 100000 times"),
            ("flate-bomb-128mib.pdf", "passed a limit: a stream (object 4 0) inflates past 64 MiB"),
            ("flate-bomb-twice-1gib.pdf", "passed a limit: a stream (object 4 0) inflates past 64 MiB"),
            ("nested-ten-million-deep.pdf", "could not be read"),
        ] {
            let line = stdout.lines().find(|l| l.contains(file)).unwrap_or_else(|| panic!("{file}: {stdout}"));
            assert!(line.contains(why), "{line}");
        }
        let link =
            if follow { "a symbolic link out of the folder: not followed" } else { "a symbolic link: not followed" };
        for name in ["link-to-passwd.txt", "link-to-etc", "link-up"] {
            let line = stdout.lines().find(|l| l.contains(name)).unwrap_or_else(|| panic!("{name}: {stdout}"));
            assert!(line.contains(link), "{line}");
        }
        let looped = stdout.lines().find(|l| l.contains("/loop:")).unwrap_or_else(|| panic!("{stdout}"));
        let inside = stdout.lines().find(|l| l.contains("link-inside")).unwrap_or_else(|| panic!("{stdout}"));
        if follow {
            assert!(looped.contains("a symbolic link to what is read already"), "{looped}");
            assert!(inside.contains("a symbolic link to what is read already"), "{inside}");
        }
        assert!(stdout.contains("a-pipe.txt: not a regular file"), "{stdout}");
    }
    let docs = env.ok(&["documents", "list"]);
    assert!(
        docs.contains("good-notes.md") && docs.contains("inside/seeds.md") && docs.contains("good-ten-pages.pdf"),
        "{docs}"
    );
    assert!(!docs.contains("passwd") && !docs.contains("link-"), "{docs}");
    let t = env.ask("wild", &[], "When are the tomato seeds sown?");
    assert!(t["context"].to_string().contains("Sow the tomato seeds in March"), "{t}");
}
