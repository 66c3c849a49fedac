//! `--config FILE` for the long-running commands (`pcdn serve`, `pcdn tracker`): a TOML file
//! whose keys are the command's long options, read before the command line is parsed.
//!
//! The file is turned into command-line arguments placed before the ones typed, so every option
//! has one parser and one set of checks, a flag typed on the command line overrides the file,
//! and a new option of a command is a key of its file without anything to register here.

use std::ffi::OsString;
use std::fmt;
use std::path::{Path, PathBuf};

use clap::error::{ContextKind, ContextValue, ErrorKind};
use clap::{Arg, ArgAction, Command};
use toml::de::{DeTable, DeValue};

/// The subcommands that take `--config`: the ones an operator runs as services.
pub const COMMANDS: &[&str] = &["serve", "tracker"];

const HELP: &str = "Read options from a TOML file: each key is a long option without its dashes \
    (`listen = \"0.0.0.0:7801\"`, `origin = true`, a list for a repeatable option); \
    options typed on the command line override the file";

/// `cli` with `--config FILE` added to every command of [`COMMANDS`], each of which lets a later
/// occurrence of an option override an earlier one (the file's value comes first).
pub fn with_config_option(cli: Command) -> Command {
    COMMANDS.iter().fold(cli, |cli, name| {
        if cli.find_subcommand(name).is_none() {
            return cli;
        }
        cli.mut_subcommand(*name, |sub| {
            sub.args_override_self(true)
                .arg(Arg::new("config").long("config").value_name("FILE").help(HELP))
        })
    })
}

/// A config file that cannot be used: which file, which line and key, and what was expected.
#[derive(Debug)]
pub struct ConfigError {
    file: PathBuf,
    line: Option<usize>,
    key: Option<String>,
    message: String,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "config file {}", self.file.display())?;
        if let Some(line) = self.line {
            write!(f, ", line {line}")?;
        }
        if let Some(key) = &self.key {
            write!(f, ", key `{key}`")?;
        }
        write!(f, ": {}", self.message)
    }
}

impl std::error::Error for ConfigError {}

/// `argv` with `--config FILE` (of a command in [`COMMANDS`]) replaced by the file's options,
/// placed right after the subcommand's name. Any other command line comes back unchanged.
pub fn expand(cli: &Command, argv: Vec<OsString>) -> Result<Vec<OsString>, ConfigError> {
    let Some(name) = argv.get(1).and_then(|arg| arg.to_str()) else {
        return Ok(argv);
    };
    let Some(sub) = cli.find_subcommand(name).filter(|_| COMMANDS.contains(&name)) else {
        return Ok(argv);
    };
    let Some((at, taken, file)) = find_config(&argv[2..]) else {
        return Ok(argv);
    };
    let from_file = read(sub, &file)?;
    let mut out = Vec::with_capacity(argv.len() + from_file.len());
    out.extend(argv[..2].iter().cloned());
    out.extend(from_file);
    out.extend(argv[2..2 + at].iter().cloned());
    out.extend(argv[2 + at + taken..].iter().cloned());
    Ok(out)
}

/// Where `--config FILE` or `--config=FILE` stands among a subcommand's arguments: its index,
/// how many arguments it takes, and the file. Nothing after a `--` counts.
fn find_config(args: &[OsString]) -> Option<(usize, usize, PathBuf)> {
    for (i, arg) in args.iter().enumerate() {
        let text = arg.to_str()?;
        if text == "--" {
            return None;
        }
        if text == "--config" {
            // Without a value, clap reports the missing value itself.
            return args.get(i + 1).map(|file| (i, 2, PathBuf::from(file)));
        }
        if let Some(file) = text.strip_prefix("--config=") {
            return Some((i, 1, PathBuf::from(file)));
        }
    }
    None
}

/// The command-line arguments a config file stands for, each checked by the command's own
/// parser so that a bad value is reported with its line and key.
fn read(sub: &Command, file: &Path) -> Result<Vec<OsString>, ConfigError> {
    let error = |line: Option<usize>, key: Option<&str>, message: String| ConfigError {
        file: file.to_owned(),
        line,
        key: key.map(str::to_owned),
        message,
    };
    let text = std::fs::read_to_string(file).map_err(|e| error(None, None, format!("cannot be read: {e}")))?;
    let table = DeTable::parse(&text).map_err(|mut e| {
        e.set_input(Some(&text));
        let line = e.span().map(|span| line_of(&text, span.start));
        error(line, None, format!("is not valid TOML:\n{e}"))
    })?;
    let mut args = Vec::new();
    // (option's long name, line, key) of each key, to name the key a parser rejects.
    let mut origins: Vec<(String, usize, String)> = Vec::new();
    for (key, value) in table.get_ref() {
        let line = line_of(&text, key.span().start);
        let key = key.get_ref().as_ref();
        let fail = |message: String| error(Some(line), Some(key), message);
        let long = key.replace('_', "-");
        let arg = sub
            .get_arguments()
            .find(|arg| arg.get_long() == Some(long.as_str()) && !matches!(long.as_str(), "config" | "help"))
            .ok_or_else(|| fail(unknown_key(sub, &long)))?;
        for value in values_of(arg, value.get_ref()).map_err(fail)? {
            args.push(OsString::from(format!("--{long}={value}")));
        }
        if matches!(arg.get_action(), ArgAction::SetTrue) && value.get_ref().as_bool() == Some(true) {
            args.push(OsString::from(format!("--{long}")));
        }
        origins.push((long, line, key.to_owned()));
    }
    check(sub, &args, &origins).map_err(|(line, key, message)| error(line, key.as_deref(), message))?;
    Ok(args)
}

/// The option values of one key: a string, a number, or a list of them for a repeatable
/// option; a boolean for a flag (which [`read`] turns into the bare flag).
fn values_of(arg: &Arg, value: &DeValue<'_>) -> Result<Vec<String>, String> {
    let long = arg.get_long().unwrap_or_default();
    match arg.get_action() {
        ArgAction::SetTrue => match value.as_bool() {
            Some(_) => Ok(Vec::new()),
            None => Err(format!(
                "--{long} is a flag: expected true or false, found {}",
                value.type_str()
            )),
        },
        ArgAction::Append => match value.as_array() {
            Some(items) => items.iter().map(|item| scalar(item.get_ref(), long)).collect(),
            None => scalar(value, long).map(|one| vec![one]),
        },
        _ => {
            if value.is_array() {
                return Err(format!(
                    "--{long} takes one value: expected a string or a number, found an array"
                ));
            }
            scalar(value, long).map(|one| vec![one])
        }
    }
}

/// A string or number as the text typed after the option.
fn scalar(value: &DeValue<'_>, long: &str) -> Result<String, String> {
    if let Some(text) = value.as_str() {
        return Ok(text.to_owned());
    }
    if let Some(int) = value.as_integer() {
        let digits = int.as_str().replace('_', "");
        return i128::from_str_radix(&digits, int.radix())
            .map(|n| n.to_string())
            .map_err(|e| format!("--{long}: integer out of range: {e}"));
    }
    if let Some(float) = value.as_float() {
        return Ok(float.as_str().replace('_', ""));
    }
    Err(format!(
        "--{long} takes a value: expected a string or a number, found {}",
        value.type_str()
    ))
}

/// The message for a key that is no option of `sub`, with the keys it has.
fn unknown_key(sub: &Command, long: &str) -> String {
    let keys: Vec<String> = sub
        .get_arguments()
        .filter_map(Arg::get_long)
        .filter(|name| !matches!(*name, "config" | "help" | "version"))
        .map(|name| name.replace('-', "_"))
        .collect();
    format!(
        "`pcdn {}` has no option --{long}; the keys are: {}",
        sub.get_name(),
        keys.join(", ")
    )
}

type Located = (Option<usize>, Option<String>, String);

/// Parses the file's arguments alone with the command's parser, so that a value the option does
/// not accept is reported at its line. Options the file leaves to the command line (a missing
/// required option) are not its fault.
fn check(sub: &Command, args: &[OsString], origins: &[(String, usize, String)]) -> Result<(), Located> {
    let mut argv = vec![OsString::from(sub.get_name())];
    argv.extend(args.iter().cloned());
    let Err(error) = sub.clone().try_get_matches_from(argv) else {
        return Ok(());
    };
    if matches!(
        error.kind(),
        ErrorKind::MissingRequiredArgument | ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand
    ) {
        return Ok(());
    }
    let culprit = match error.get(ContextKind::InvalidArg) {
        Some(ContextValue::String(arg)) => Some(arg.clone()),
        Some(ContextValue::Strings(args)) => args.first().cloned(),
        _ => None,
    };
    let origin = culprit.and_then(|arg| {
        let long = arg
            .trim_start_matches('-')
            .split([' ', '='])
            .next()
            .unwrap_or_default()
            .to_owned();
        origins.iter().find(|(name, _, _)| *name == long)
    });
    let rendered = error.render().to_string();
    let message = rendered
        .lines()
        .filter(|line| !line.starts_with("For more information"))
        .collect::<Vec<_>>()
        .join("\n");
    let message = message.trim().trim_start_matches("error: ").to_owned();
    Err(match origin {
        Some((_, line, key)) => (Some(*line), Some(key.clone()), message),
        None => (None, None, message),
    })
}

/// The 1-based line of a byte offset.
fn line_of(text: &str, offset: usize) -> usize {
    text.as_bytes()[..offset.min(text.len())]
        .iter()
        .filter(|&&b| b == b'\n')
        .count()
        + 1
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[derive(clap::Parser, Debug)]
    struct Cli {
        #[command(subcommand)]
        command: Sub,
    }

    #[derive(clap::Subcommand, Debug)]
    enum Sub {
        Serve {
            #[arg(long, default_value = "127.0.0.1:7801")]
            listen: std::net::SocketAddr,
            #[arg(long)]
            store: PathBuf,
            #[arg(long)]
            origin: bool,
            #[arg(long = "server")]
            servers: Vec<String>,
            #[arg(long)]
            max_sessions: Option<u32>,
        },
        Other {
            #[arg(long)]
            config: Option<PathBuf>,
        },
    }

    fn cli() -> Command {
        with_config_option(<Cli as clap::CommandFactory>::command())
    }

    fn file(text: &str) -> tempfile::NamedTempFile {
        let mut file = tempfile::NamedTempFile::new().unwrap();
        file.write_all(text.as_bytes()).unwrap();
        file
    }

    fn run(args: &[&str]) -> Result<Cli, String> {
        let argv = args.iter().map(OsString::from).collect();
        let cli_command = cli();
        let argv = expand(&cli_command, argv).map_err(|e| e.to_string())?;
        let matches = cli_command.try_get_matches_from(argv).map_err(|e| e.to_string())?;
        <Cli as clap::FromArgMatches>::from_arg_matches(&matches).map_err(|e| e.to_string())
    }

    #[test]
    fn every_option_is_a_key_and_the_command_line_overrides_the_file() {
        let config = file(
            "listen = \"0.0.0.0:9000\"\nstore = \"edge/\"\norigin = true\nserver = [\"a\", \"b\"]\nmax_sessions = 64\n",
        );
        let path = config.path().to_str().unwrap();
        let Sub::Serve {
            listen,
            store,
            origin,
            servers,
            max_sessions,
        } = run(&["pcdn", "serve", "--config", path, "--listen", "127.0.0.1:1"])
            .unwrap()
            .command
        else {
            panic!("not serve")
        };
        assert_eq!(listen, "127.0.0.1:1".parse().unwrap());
        assert_eq!(store, PathBuf::from("edge/"));
        assert!(origin);
        assert_eq!(servers, ["a", "b"]);
        assert_eq!(max_sessions, Some(64));
    }

    #[test]
    fn a_false_flag_is_left_out_and_config_equals_works() {
        let config = file("store = \"s\"\norigin = false\n");
        let arg = format!("--config={}", config.path().display());
        let Sub::Serve { origin, .. } = run(&["pcdn", "serve", &arg]).unwrap().command else {
            panic!("not serve")
        };
        assert!(!origin);
    }

    #[test]
    fn errors_name_the_file_the_line_and_the_key() {
        let config = file("store = \"s\"\n\nlisten = \"nowhere\"\n");
        let path = config.path().to_str().unwrap();
        let e = run(&["pcdn", "serve", "--config", path]).unwrap_err();
        assert!(
            e.contains(path) && e.contains("line 3") && e.contains("key `listen`"),
            "{e}"
        );
        assert!(e.contains("nowhere"), "{e}");

        let config = file("store = \"s\"\nlisten_on = \"x\"\n");
        let e = run(&["pcdn", "serve", "--config", config.path().to_str().unwrap()]).unwrap_err();
        assert!(
            e.contains("line 2") && e.contains("key `listen_on`") && e.contains("no option --listen-on"),
            "{e}"
        );
        assert!(e.contains("max_sessions"), "the known keys are listed: {e}");

        let config = file("origin = \"yes\"\n");
        let e = run(&["pcdn", "serve", "--config", config.path().to_str().unwrap()]).unwrap_err();
        assert!(e.contains("line 1") && e.contains("expected true or false"), "{e}");

        let config = file("listen = [\"a\"]\n");
        let e = run(&["pcdn", "serve", "--config", config.path().to_str().unwrap()]).unwrap_err();
        assert!(e.contains("takes one value"), "{e}");

        let config = file("store = \"s\"\nlisten = \n");
        let e = run(&["pcdn", "serve", "--config", config.path().to_str().unwrap()]).unwrap_err();
        assert!(e.contains("line 2") && e.contains("not valid TOML"), "{e}");

        let e = run(&["pcdn", "serve", "--config", "/nonexistent/pcdn.toml"]).unwrap_err();
        assert!(
            e.contains("/nonexistent/pcdn.toml") && e.contains("cannot be read"),
            "{e}"
        );
    }

    #[test]
    fn other_commands_and_arguments_after_a_double_dash_are_left_alone() {
        let argv: Vec<OsString> = ["pcdn", "other", "--config", "links.toml"]
            .iter()
            .map(OsString::from)
            .collect();
        assert_eq!(expand(&cli(), argv.clone()).unwrap(), argv);
        let argv: Vec<OsString> = ["pcdn", "serve", "--", "--config", "x"]
            .iter()
            .map(OsString::from)
            .collect();
        assert_eq!(expand(&cli(), argv.clone()).unwrap(), argv);
    }
}
