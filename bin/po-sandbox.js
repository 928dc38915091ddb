#!/usr/bin/env node
'use strict'
// The po-sandbox command: parses arguments and prints; every check and engine call runs in the
// Rust addon.

const { parseArgs } = require('node:util')

const USAGE = `Usage: po-sandbox <command> [options]

Commands:
  doctor                Check whether the sandbox layer can run here: Node.js, every container
                        engine candidate, the runtime bundle and the sandbox image.
                        Exits 0 when ready, 1 when not.
  ls                    List this hub's sandbox containers (--all: every hub's).
  stop <workspace>      Stop and remove a workspace's container (volumes are kept).
  stop --all            Stop and remove every container of this hub.
  prune                 Remove the per-hub networks no container uses (every hub's, or
                        --owner's; those made in the last 5 minutes stay), and with --volumes
                        the volumes of workspaces whose container and folder are both gone.
                        --dry-run lists them only.
  up [dir]              Bring up (or adopt) the sandbox of a folder (default: the current one)
                        and print its URL and security posture. Uses Po's runtime bundle, or
                        the embedded demo bundle when Po's is not installed. With --clone the
                        container works on a copy of the folder in a volume of its own (filled
                        once; the folder is not mounted and nothing reaches it). With --pull
                        the base image is pulled from its registry first: when it changed, the
                        sandbox image is built on it and a running container replaced.
  down [dir]            Stop and remove the folder's sandbox container (volumes are kept, the
                        copy of a --clone sandbox too; --discard removes that copy).
  exec [dir] -- <command...>
                        Run a command in the folder's running sandbox, in the folder, as the
                        container's user, with brokered credentials; interactive (a TTY) when
                        stdin is a terminal. Exits with the command's exit code (125 when
                        po-sandbox itself fails).
  port [dir] <port>[:<host-port>]
                        Forward a port of the folder's running sandbox (its 127.0.0.1) to this
                        host's 127.0.0.1 (the host port given, or a free one) and print the URL;
                        runs until Ctrl-C (exit 0) or until the sandbox stops (exit 1, with why).
  port ls               List the ports forwarded from this hub's running sandboxes (--all:
                        every hub's), found in their process lists.
  review [dir]          List the folder's files the host may run (package.json scripts,
                        Makefiles, cargo, npm and yarn configuration, tool versions, workflows,
                        AGENTS.md/CLAUDE.md, nested repositories) that changed since its
                        sandbox container was made, each with why. Exits 0 (also when it lists
                        changes), 1 when the folder has no sandbox baseline.
  diff [dir]            A --clone sandbox: the agent's commits since the copy was made and its
                        uncommitted work (stat and diff), and the files among them the host may
                        run. Git runs inside the container, never on the folder.
  apply [dir]           A --clone sandbox: put the agent's commits (and its uncommitted work as
                        one commit marked 'Po-Sandbox: uncommitted work') on the branch
                        po-sandbox/<workspace> of the folder's repository (--branch: another),
                        same commit ids; the working tree, index, HEAD and hooks are untouched.
                        A branch that diverged or is checked out is refused. Again: no change.
                        A folder without git: its changed files are written into the folder
                        only with --yes (without it: what would be), where the host still has
                        what went into the copy (else kept: a conflict); files the host may run,
                        executable files and links only with --include-executable.
  policy show           The sandbox policy in force (network mode, allow list, name overrides,
                        each workspace's own additions, workspace mode, guarded paths, run
                        flags) and where each value comes from: an
                        option, a variable, <po-home>/sandbox-policy.yaml (its line) or the
                        default.
  policy check [<host[:port]>] [dir]
                        Without a host: whether the policy file is good (else its line and
                        field; exit 1). With one: allowed or not (exit 1), and by which rule.
  policy log [dir]      The egress denials recorded (every workspace's, or the folder's), by
                        destination, the most frequent first, each with the command that
                        allows it.
  policy init <preset>  Write the policy file from a preset: open, balanced (allowlist with
                        the registries and git hosts) or closed (none). Never over a file.
  allow <host[:port]> [dir]
                        Add a destination (port 443 when none; *.suffix:port for every name
                        under one) to the allow list of every workspace, or of the folder's
                        workspace only; the file keeps its comments. A running hub applies it
                        within a second, without restarting anything.
  deny <host[:port]> [dir]
                        Take a destination out of that list; a running hub closes the open
                        connections to it.
  demo                  What 'npm start' runs: the doctor, then 'up' of a throw-away folder on
                        the demo bundle, a check that it answers and reports it is contained,
                        then 'down'. Exits 0 when the layer works here.
  help                  Show this text.

Options:
  --json                Print JSON instead of text.
  --po-home <dir>       The Po home (default ~/.po); it also decides this hub's owner id.
  --owner <id>          ls, stop, review: the owner id (default: derived from the Po home).
  --workspace <id>      policy check|log, allow, deny: this workspace id rather than the
                        folder's (a hub's own ids, as Po's hub gives them).
  --all                 ls: every hub's containers; stop: every container of this hub.
  --volumes             prune: also the volumes of workspaces gone with their folder.
  --clone               up: work on a copy of the folder (PO_SANDBOX_WORKSPACE_MODE=clone).
  --pull                up: pull the base image from its registry first (newer security fixes).
  --discard             down: also remove the folder's copy (--clone), with the work in it.
  --branch <name>       apply: the branch to set (default po-sandbox/<workspace>).
  --patch <file>        apply: write the uncommitted work to this file as a patch instead.
  --yes                 apply, a folder without git: write the changed files into the folder.
  --include-executable  apply, a folder without git: also files the host may run, executable
                        files and links (never a link out of the folder).
  --dry-run             prune: list what it would remove, remove nothing.
  --engine <name>       Use only this engine: docker, podman, nerdctl or finch.
  --timeout-ms <ms>     doctor: bound each engine step (connect, ping, version, info); default 3000.
  --runtime-version <v> doctor: check this runtime bundle version folder.
  --base-image <ref>    doctor, up, exec, demo: the image recipe's base.
  --image-variant <v>   doctor, up, exec, demo: full or minimal.
`

// Every option this command knows; `--name value` and `--name=value` alike.
const OPTIONS = {
  json: { type: 'boolean' },
  all: { type: 'boolean' },
  volumes: { type: 'boolean' },
  clone: { type: 'boolean' },
  pull: { type: 'boolean' },
  discard: { type: 'boolean' },
  'dry-run': { type: 'boolean' },
  branch: { type: 'string' },
  patch: { type: 'string' },
  yes: { type: 'boolean' },
  'include-executable': { type: 'boolean' },
  help: { type: 'boolean', short: 'h' },
  'timeout-ms': { type: 'string' },
  engine: { type: 'string' },
  'po-home': { type: 'string' },
  owner: { type: 'string' },
  workspace: { type: 'string' },
  'runtime-version': { type: 'string' },
  'base-image': { type: 'string' },
  'image-variant': { type: 'string' },
}

function fail(message) {
  process.stderr.write(`po-sandbox: ${shown(String(message))}\n\n${USAGE}`)
  process.exit(2)
}

function parse(argv) {
  // `exec`'s command is everything after the first `--`, taken as it is.
  const split = argv.indexOf('--')
  const head = split < 0 ? argv : argv.slice(0, split)
  // Not strict: the tokens are checked here, in order, so a refusal names the argument in this
  // command's words and exits 2 with the usage.
  const { tokens } = parseArgs({ args: head, options: OPTIONS, strict: false, allowPositionals: true, tokens: true })
  const opts = { command: undefined, args: [], json: false, all: false, rest: split < 0 ? undefined : argv.slice(split + 1) }
  for (const token of tokens) {
    if (token.kind === 'positional') {
      if (token.value === '-') fail("unknown option '-'")
      if (opts.command === undefined) opts.command = token.value
      else opts.args.push(token.value)
      continue
    }
    if (token.kind === 'option-terminator') fail("unknown option '--'")
    if (token.kind !== 'option') continue
    const type = Object.hasOwn(OPTIONS, token.name) ? OPTIONS[token.name].type : undefined
    if (type === undefined || (type === 'boolean' && token.value !== undefined)) fail(`unknown option '${token.rawName}${token.inlineValue ? `=${token.value}` : ''}'`)
    if (token.name === 'help') opts.command = 'help'
    else if (type === 'boolean') opts[token.name.replace(/-([a-z])/g, (_, c) => c.toUpperCase())] = true
    else {
      const { value } = token
      if (value === undefined || value.startsWith('--')) fail(`${token.rawName} needs a value`)
      if (token.name === 'timeout-ms') {
        const ms = Number(value)
        if (!Number.isInteger(ms) || ms < 1 || ms > 600000) fail(`--timeout-ms must be a whole number from 1 to 600000, not '${value}'`)
        opts.timeoutMs = ms
      } else opts[token.name.replace(/-([a-z])/g, (_, c) => c.toUpperCase())] = value
    }
  }
  return opts
}

function age(unixSeconds) {
  const s = Math.max(0, Math.floor(Date.now() / 1000) - unixSeconds)
  if (s < 120) return `${s}s`
  if (s < 7200) return `${Math.floor(s / 60)}m`
  if (s < 172800) return `${Math.floor(s / 3600)}h`
  return `${Math.floor(s / 86400)}d`
}

function table(rows, all) {
  if (rows.length === 0) return all ? 'No sandbox containers.\n' : "No sandbox containers for this hub (try --all for every hub's).\n"
  // The run flags column only when some container has any.
  const flags = rows.some((r) => r.runFlags.length > 0)
  // The forwarded ports column only when some container has any.
  const fwd = rows.some((r) => r.forwards.length > 0)
  const head = ['WORKSPACE', 'STATE', 'PORT', 'IMAGE', 'AGE', ...(all ? ['OWNER'] : []), 'NAME', ...(fwd ? ['FORWARDS'] : []), ...(flags ? ['RUN FLAGS'] : [])]
  const body = rows.map((r) => [r.workspaceId, r.state, r.hostPort ? `127.0.0.1:${r.hostPort}` : '-', r.image, age(r.created), ...(all ? [r.owner] : []), r.name, ...(fwd ? [r.forwards.map((f) => `${f.port}->127.0.0.1:${f.hostPort}`).join(' ') || '-'] : []), ...(flags ? [r.runFlags.join(' ') || '-'] : [])])
  const widths = head.map((h, i) => Math.max(h.length, ...body.map((b) => String(b[i]).length)))
  return [head, ...body].map((cols) => cols.map((c, i) => String(c).padEnd(widths[i])).join('  ').trimEnd()).join('\n') + '\n'
}

/** `port ls`: one line per forwarded port. */
function forwardTable(rows, all) {
  if (rows.length === 0) return 'No forwarded ports.\n'
  const head = ['WORKSPACE', 'PORT', 'URL', ...(all ? ['OWNER'] : [])]
  const body = rows.map((r) => [r.workspaceId, String(r.port), r.url, ...(all ? [r.owner] : [])])
  const widths = head.map((h, i) => Math.max(h.length, ...body.map((b) => b[i].length)))
  return [head, ...body].map((cols) => cols.map((c, i) => c.padEnd(widths[i])).join('  ').trimEnd()).join('\n') + '\n'
}

/** What prune removed (or would remove, on a dry run), as a person reads it. */
function pruned(r) {
  const verb = r.dryRun ? 'Would remove' : 'Removed'
  const lines = [['network', r.networks], ['volume', r.volumes]].filter(([, names]) => names.length > 0).map(([kind, names]) => `${verb} ${names.length} ${kind}${names.length === 1 ? '' : 's'}: ${names.join(', ')}\n`)
  return lines.length > 0 ? lines.join('') : 'Nothing to prune.\n'
}

/** Exits 2 with the usage when the arguments do not fit the command. */
function checkUsage(opts) {
  const { command, args } = opts
  if (!['doctor', 'ls', 'stop', 'prune', 'up', 'down', 'exec', 'port', 'review', 'diff', 'apply', 'demo', 'policy', 'allow', 'deny'].includes(command)) fail(`unknown command '${command}'`)
  if ((opts.volumes || opts.dryRun) && command !== 'prune') fail(`${opts.volumes ? '--volumes' : '--dry-run'} is an option of prune only`)
  if ((opts.clone || opts.pull) && command !== 'up') fail(`${opts.clone ? '--clone' : '--pull'} is an option of up only`)
  if (opts.discard && command !== 'down') fail('--discard is an option of down only')
  if (opts.workspace !== undefined && !['policy', 'allow', 'deny'].includes(command)) fail('--workspace is an option of policy check|log, allow and deny only')
  if ((opts.branch !== undefined || opts.patch !== undefined) && command !== 'apply') fail(`${opts.branch !== undefined ? '--branch' : '--patch'} is an option of apply only`)
  if ((opts.yes || opts.includeExecutable) && command !== 'apply') fail(`${opts.yes ? '--yes' : '--include-executable'} is an option of apply only`)
  if (opts.rest !== undefined && command !== 'exec') fail("unknown option '--'")
  if (command === 'exec' && (opts.rest === undefined || opts.rest.length === 0)) fail('exec needs a command after --, as in: po-sandbox exec [dir] -- ls -la')
  if (command === 'port' && args[0] === 'ls') {
    if (args.length > 1) fail(`unexpected argument '${args[1]}'`)
  } else if (command === 'port' && (args.length < 1 || args.length > 2 || !/^\d+(:\d+)?$/.test(args.at(-1)))) fail('port needs the port to forward, as in: po-sandbox port [dir] 5173 (or 5173:8080 for host port 8080)')
  else if (command === 'port') {
    const [inside, host] = args.at(-1).split(':').map(Number)
    if (inside < 1 || inside > 65535) fail(`port: ${inside} is not a port from 1 to 65535`)
    if (host > 65535) fail(`port: host port ${host} is not a port from 1 to 65535 (or 0: any free port)`)
  }
  if (command === 'policy') {
    const [verb, ...rest] = args
    if (!['show', 'check', 'init', 'log'].includes(verb)) fail(`policy needs show, check, log or init${verb === undefined ? '' : `, not '${verb}'`}`)
    if (verb === 'log' && rest.length > 1) fail(`unexpected argument '${rest[1]}'`)
    if (opts.workspace !== undefined && !['check', 'log'].includes(verb)) fail(`--workspace is an option of policy check|log, allow and deny only`)
    if (opts.workspace !== undefined && (verb === 'log' ? rest.length > 0 : rest.length > 1)) fail('name the workspace by its folder or by --workspace, not both')
    if (verb === 'show' && rest.length > 0) fail(`unexpected argument '${rest[0]}'`)
    if (verb === 'check' && rest.length > 2) fail(`unexpected argument '${rest[2]}'`)
    if (verb === 'init' && rest.length !== 1) fail('policy init needs one preset: open, balanced or closed')
    return
  }
  if (['allow', 'deny'].includes(command) && (args.length < 1 || args.length > 2)) fail(`${command} needs a host, as in: po-sandbox ${command} registry.example.com[:443] [dir]`)
  if (['allow', 'deny'].includes(command) && opts.workspace !== undefined && args.length > 1) fail('name the workspace by its folder or by --workspace, not both')
  if (['allow', 'deny'].includes(command)) return
  const folderCommand = ['up', 'down', 'exec', 'review', 'diff', 'apply'].includes(command)
  if (folderCommand && args.length > 1) fail(`${command} takes at most one folder, not '${args[1]}'`)
  if (!folderCommand && !['stop', 'port'].includes(command) && args.length > 0) fail(`unexpected argument '${args[0]}'`)
  if (command === 'stop' && (args.length > 1 || (args.length === 0) === !opts.all)) fail('stop needs one workspace id, or --all')
}

async function main() {
  const opts = parse(process.argv.slice(2))
  if (opts.command === undefined || opts.command === 'help') {
    process.stdout.write(USAGE)
    return 0
  }
  checkUsage(opts)
  let addon
  try {
    addon = require('../index.js')
  } catch (err) {
    process.stderr.write(`po-sandbox: the native addon could not be loaded (${err.message}).\nReinstall @agimon-ai/po-sandbox for this platform (${process.platform}-${process.arch}), or build it with 'npm run build'.\n`)
    return 1
  }
  const common = { poHome: opts.poHome, engine: opts.engine }
  const portLs = opts.command === 'port' && opts.args[0] === 'ls'
  if (['policy', 'allow', 'deny'].includes(opts.command)) return policyCommand(addon, opts)
  if (!portLs && ['up', 'down', 'exec', 'port', 'review', 'diff', 'apply', 'demo'].includes(opts.command)) return folderCommand(addon, opts)
  try {
    if (opts.command === 'doctor') {
      const report = await addon.doctor(process.version, { ...common, timeoutMs: opts.timeoutMs, runtimeVersion: opts.runtimeVersion, baseImage: opts.baseImage, imageVariant: opts.imageVariant })
      process.stdout.write(opts.json ? `${JSON.stringify(report, null, 2)}\n` : report.text)
      return report.ok ? 0 : 1
    }
    if (opts.command === 'ls') {
      const rows = await addon.listSandboxContainers({ ...common, owner: opts.owner, allOwners: opts.all, forwards: true })
      process.stdout.write(opts.json ? `${JSON.stringify(rows, null, 2)}\n` : table(rows, opts.all))
      return 0
    }
    if (portLs) {
      const rows = await addon.listSandboxContainers({ ...common, owner: opts.owner, allOwners: opts.all, forwards: true })
      const forwards = rows.flatMap((r) => r.forwards.map((f) => ({ workspaceId: r.workspaceId, owner: r.owner, port: f.port, hostPort: f.hostPort, url: `http://127.0.0.1:${f.hostPort}` })))
      process.stdout.write(opts.json ? `${JSON.stringify(forwards, null, 2)}\n` : forwardTable(forwards, opts.all))
      return 0
    }
    if (opts.command === 'prune') {
      const r = await addon.pruneSandboxLeftovers({ ...common, owner: opts.owner, removeVolumes: opts.volumes, dryRun: opts.dryRun })
      process.stdout.write(opts.json ? `${JSON.stringify(r, null, 2)}\n` : pruned(r))
      return 0
    }
    const stopped = await addon.stopSandboxContainers({ ...common, owner: opts.owner, workspace: opts.args[0], all: opts.all })
    if (opts.json) process.stdout.write(`${JSON.stringify({ stopped }, null, 2)}\n`)
    else if (stopped.length === 0) process.stdout.write(opts.all ? 'No containers of this hub to stop.\n' : `Workspace '${opts.args[0]}' has no container of this hub.\n`)
    else process.stdout.write(`Stopped and removed: ${stopped.join(', ')} (volumes kept).\n`)
    return 0
  } catch (err) {
    if (opts.json) process.stdout.write(`${JSON.stringify({ ok: false, error: { code: err.code, message: err.message } }, null, 2)}\n`)
    else process.stderr.write(`po-sandbox: ${shown(String(err.message))} [${shown(String(err.code))}]\n`)
    return 1
  }
}

/** `policy show|check|init`, `allow`, `deny`: the Po home's policy file. A folder names its
 * workspace's own list. Exit 0 when done or allowed, 1 when denied or the file is not good. */
function policyCommand(addon, opts) {
  const [verb, ...rest] = opts.command === 'policy' ? opts.args : [opts.command, ...opts.args]
  try {
    const folder = verb === 'log' ? rest[0] : verb === 'check' || verb === 'allow' || verb === 'deny' ? rest[1] : undefined
    const workspace = opts.workspace ?? (folder === undefined ? undefined : addon.workspaceForFolder(folder).id)
    const r = addon.sandboxPolicy({ command: verb, poHome: opts.poHome, target: ['check', 'allow', 'deny'].includes(verb) ? rest[0] : undefined, preset: verb === 'init' ? rest[0] : undefined, workspace })
    process.stdout.write(opts.json ? `${JSON.stringify(r, null, 2)}\n` : shown(r.text))
    return r.ok ? 0 : 1
  } catch (err) {
    if (opts.json) process.stdout.write(`${JSON.stringify({ ok: false, error: { code: err.code, message: err.message } }, null, 2)}\n`)
    else process.stderr.write(`po-sandbox: ${shown(String(err.message))} [${shown(String(err.code))}]\n`)
    return 1
  }
}

// up, down, exec, review and demo (what `npm start` runs) live in their own module.
const { folderCommand, shown } = require('./sandbox-commands.js')

main().then((code) => { process.exitCode = code })
