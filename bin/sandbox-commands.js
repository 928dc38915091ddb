'use strict'
// The folder commands of po-sandbox: `up`, `down`, `exec`, `port`, `review`, `diff`, `apply` and `demo` (what `npm start`
// runs).
// Thin: they call the same provider Po's hub uses (registerSandboxLayer) and print.

const { fstatSync, mkdirSync, mkdtempSync, rmSync, statSync } = require('node:fs')
const os = require('node:os')
const path = require('node:path')

// bin/pi-in-sandbox.js (crypto, child processes) is loaded only when pi is asked for: every
// exec pays for what is loaded here.

/** The base image `npm test` builds where no registry can be reached. */
const LOCAL_BASE = 'po-sandbox-test-base:node24-nft'
/** The exit code of `exec` when po-sandbox itself fails (as `docker exec` does). */
const EXEC_FAILED = 125

/** A Po host for the command line: the global scope, not contained, nothing to register into. */
const CLI_HOST = { scope: 'global', identity: { contained: false }, registerSandboxProvider() {}, publishService() {} }

function coded(code, message) {
  return Object.assign(new Error(message), { code })
}

/** The container provider for the command line, on Po's bundle or the demo one. One-shot: it
 * starts up only when a call needs it, so `up` on a running sandbox and `exec` adopt the
 * container straight away. */
function layerFor(addon, opts, extra = {}) {
  const layer = addon.registerSandboxLayer(CLI_HOST, { poHome: opts.poHome, engine: opts.engine, baseImage: opts.baseImage, imageVariant: opts.imageVariant, demoRuntime: true, oneShot: true, ...extra })
  if (!layer) throw coded('NESTING_REFUSED', 'Refusing to manage containers from inside a sandbox container (PO_SANDBOX=1): sandboxes do not nest. Run this on the host.')
  return layer
}

/** Image build progress as step lines on a terminal; nothing with --json or when piped. */
function showProgress(layer, opts) {
  if (opts.json || !process.stderr.isTTY) return
  layer.provider.onEvent((e) => {
    if (e.type !== 'image') return
    if (e.phase === 'pulling') process.stderr.write(`Pulling the base image ${e.tag} from its registry...\n`)
    else if (e.phase === 'pulled') process.stderr.write(`Pulled ${e.tag}: ${e.message}.\n`)
    else if (e.phase === 'building') process.stderr.write(`Building the sandbox image ${e.tag} (once; later runs reuse it)...\n`)
    else if (e.phase === 'progress' && /^Step \d+\/\d+/.test(e.message ?? '')) process.stderr.write(`  ${e.message.trim()}\n`)
    else if (e.phase === 'built') process.stderr.write(`Built ${e.tag}.\n`)
  })
}

function runtimeLine(version) {
  return version === 'demo' ? "the embedded demo bundle (Po's runtime bundle is not installed)" : `Po's runtime bundle ${version}`
}

/** What `up` prints: the URL and the posture the engine reports. */
function upText(ws, c, runtimeVersion, hints, pulled) {
  const p = c.posture
  const mounts = p.mounts.map((m) => `${m.target} (${m.readOnly ? 'ro' : 'rw'}${m.kind === 'volume' ? `, volume ${m.source}` : m.source !== m.target ? `, from ${m.source}` : ''})`)
  const brokered = p.mounts.some((m) => m.target === '/run/po-broker')
  const broker = !brokered ? 'no credentials' : `brokered${p.brokered?.length ? ` (${p.brokered.join('; ')})` : ''}: the container holds per-session placeholders, never a key`
  return [
    `Sandbox ${c.adopted ? 'adopted (already running)' : 'started'} for ${ws.path}`,
    `  URL         ${c.url}`,
    `  Workspace   ${ws.id}${c.workspaceMode === 'clone' ? ' (clone mode: a copy in its own volume; the folder is not mounted)' : ''}`,
    `  Runtime     ${runtimeLine(runtimeVersion)}`,
    ...(pulled ? [`  Base        pulled from its registry: ${pulled}`] : []),
    `  Container   ${c.name} (${c.containerId.slice(0, 12)}), image ${c.image}`,
    `  Posture     user ${p.user}; ${p.noCapabilities ? 'all capabilities dropped' : 'CAPABILITIES NOT ALL DROPPED'}; ${p.noNewPrivileges ? 'no-new-privileges' : 'NEW PRIVILEGES ALLOWED'}; ${p.privileged ? 'PRIVILEGED' : 'not privileged'}; pid limit ${p.pidsLimit ?? 'none'}; network ${p.networks.join(', ') || p.networkMode}`,
    `  Limits      memory ${p.memory ? `${Math.round(p.memory / 2 ** 20)} MiB` : 'NONE'}; cpus ${p.nanoCpus ? p.nanoCpus / 1e9 : 'NONE'}; cpu shares ${p.cpuShares || 'default'}; root file system ${p.readOnlyRoot ? 'read-only' : 'WRITABLE'}; health check ${p.healthCheck ? 'yes' : 'NONE'}`,
    `  Published   ${p.published.join(', ') || 'nothing'}`,
    `  Run flags   ${p.runFlags.join(' ') || 'none'}${p.runtime ? ` (runtime ${p.runtime})` : ''}`,
    `  Credentials ${broker}`,
    ...(p.execSpawner ? [`  Exec        the engine's exec each time (slower): ${p.execSpawner}`] : []),
    `  Mounts      ${mounts.join('\n              ')}`,
    ...(hints ? ['', `Run a command in it: po-sandbox exec ${ws.path} -- <command...>`, `Stop it:             po-sandbox down ${ws.path}`] : []),
    '',
  ].join('\n')
}

async function up(addon, opts, ws) {
  const layer = layerFor(addon, opts, opts.pull ? { pullBase: true } : {})
  showProgress(layer, opts)
  let pulled
  layer.provider.onEvent((e) => {
    if (e.type === 'image' && e.phase === 'pulled') pulled = e.message
  })
  const c = await layer.containers.start({ id: ws.id, path: ws.path, ...(opts.clone ? { mode: 'clone' } : {}) })
  const { runtimeVersion, warnings } = layer.provider.status()
  if (!opts.json) for (const w of warnings ?? []) process.stderr.write(`po-sandbox: warning: ${w}\n`)
  if (opts.json) process.stdout.write(`${JSON.stringify({ ok: true, workspace: ws, runtimeVersion, demo: runtimeVersion === 'demo', warnings, ...(pulled ? { pulled } : {}), container: c }, null, 2)}\n`)
  else process.stdout.write(upText(ws, c, runtimeVersion, opts.command === 'up', pulled))
  return { layer, container: c }
}

async function down(addon, opts, ws, removeVolumes = false) {
  const discard = opts.discard === true
  const stopped = await addon.stopSandboxContainers({ poHome: opts.poHome, engine: opts.engine, workspace: ws.id, removeVolumes, discard })
  const copy = discard ? ' Its copy (clone mode) was discarded.' : ''
  if (opts.json) process.stdout.write(`${JSON.stringify({ ok: true, workspace: ws, stopped: stopped.length > 0, discarded: discard }, null, 2)}\n`)
  else if (stopped.length === 0) process.stdout.write(`The sandbox of ${ws.path} (workspace ${ws.id}) has no container: nothing to stop.${copy}\n`)
  else process.stdout.write(`Stopped and removed the sandbox of ${ws.path} (workspace ${ws.id})${removeVolumes ? ', and its volumes' : '; its volumes are kept'}.${copy}\n`)
}

/** What `review` prints: one line per changed file the host may run, then what to do (the
 * agent chose the paths: shown without their control characters). */
function reviewText(r) {
  const since = `since its sandbox container was made (${r.since})`
  const incomplete = r.complete ? [] : ['(Incomplete: a walk limit was hit or a folder could not be read; files beyond it were not compared.)']
  if (r.changes.length === 0) return [`No file the host may run changed in ${r.path} ${since}.`, ...incomplete, ''].map(shown).join('\n')
  const width = Math.max(...r.changes.map((c) => c.path.length + c.change.length + 3))
  const lines = r.changes.map((c) => `${`${c.path} (${c.change})`.padEnd(width)}  ${c.class}: ${c.reason}${c.detail ? ` [${c.detail}]` : ''}`)
  return [
    `Files the host may run that changed in ${r.path} ${since}:`,
    ...lines,
    ...incomplete,
    'Look at each of them before running anything in this folder on the host (npm, make, cargo, yarn, mise, git there, or an agent session).',
    '',
  ].map(shown).join('\n')
}

async function review(addon, opts, ws) {
  const r = await addon.reviewSandboxWorkspace(ws.id, { poHome: opts.poHome, owner: opts.owner })
  process.stdout.write(opts.json ? `${JSON.stringify({ ok: true, ...r }, null, 2)}\n` : reviewText(r))
}

/** The lines naming the files of `changes` the host may run. */
function classLines(files) {
  return files.filter((f) => f.class).map((f) => `  ${f.path} (${f.change})  ${f.class}: ${f.reason}`)
}

/** Text from the copy as a terminal may show it: control characters (escape sequences that could
 * hide lines, retitle the window or write the clipboard) shown as `\xNN`; tabs and newlines kept. */
function shown(text) {
  return text.replace(/[\x00-\x08\x0b-\x1f\x7f-\x9f]/g, (c) => `\\x${c.charCodeAt(0).toString(16).padStart(2, '0')}`)
}

/** The lines of a folder copy's files: each path, its change and what `apply` does with it. */
function folderLines(files) {
  return files.map((f) => `  ${f.path} (${f.change})  ${f.outcome}${f.class ? ` [${f.class}]` : ''}${f.note ? `: ${f.note}` : ''}`)
}

/** What `diff` prints for a folder without git's copy: the files, the stat, the patch. */
function folderDiffText(d) {
  const c = d.uncommitted
  if (c.files.length === 0) return `The copy of ${d.path} (workspace ${d.workspaceId}, a folder without git) has no change against what went into it.\n`
  return [
    `The work in the copy of ${d.path} (workspace ${d.workspaceId}, a folder without git), against what went into it:`,
    ...folderLines(c.files),
    c.stat.trimEnd(),
    '',
    c.patch.trimEnd(),
    `Take it with: po-sandbox apply ${d.path} --yes (and --include-executable for what is held back)`,
    '',
  ].map(shown).join('\n')
}

/** What `diff` prints: the commits, then each part's stat, host-run files and patch (the agent's
 * text, so shown without its control characters). */
function diffText(d) {
  if (d.kind === 'folder') return folderDiffText(d)
  const part = (title, c) => c.files.length === 0 ? [`${title}: none.`] : [`${title}:`, c.stat.trimEnd(), ...(classLines(c.files).length ? ['Files the host may run:', ...classLines(c.files)] : []), '', c.patch.trimEnd()]
  return [
    `The work in the copy of ${d.path} (workspace ${d.workspaceId}) since ${d.base ? d.base.slice(0, 12) : 'its start (no commit)'}:`,
    d.commits.length ? `Commits (${d.commits.length}):` : 'Commits: none.',
    ...d.commits.map((c) => `  ${c.id.slice(0, 12)} ${c.subject} (${c.author})`),
    ...part('Committed changes', d.committed),
    ...part('Uncommitted changes (tracked and untracked)', d.uncommitted),
    `Take it with: po-sandbox apply ${d.path}`,
    '',
  ].map(shown).join('\n')
}

/** `diff` and `apply` of a --clone sandbox, through the provider as `exec` reaches it. */
async function cloneWork(addon, opts, ws) {
  const layer = layerFor(addon, opts)
  if (opts.command === 'diff') {
    const d = await layer.containers.diff(ws.id, { path: ws.path })
    process.stdout.write(opts.json ? `${JSON.stringify({ ok: true, ...d }, null, 2)}\n` : diffText(d))
    return
  }
  const patch = opts.patch === undefined ? undefined : path.resolve(opts.patch)
  const r = await layer.containers.apply(ws.id, { path: ws.path, branch: opts.branch, patch, yes: opts.yes, includeExecutable: opts.includeExecutable })
  if (r.kind === 'folder' && !opts.json) return void process.stdout.write([r.message, ...folderLines(r.files), ''].map(shown).join('\n'))
  const extra = [r.uncommittedCommit ? `The uncommitted work is commit ${r.uncommittedCommit.slice(0, 12)} (marked 'Po-Sandbox: uncommitted work').` : '', r.patch ? `The uncommitted work is in ${r.patch}.` : ''].filter(Boolean)
  process.stdout.write(opts.json ? `${JSON.stringify({ ok: true, ...r }, null, 2)}\n` : [r.message, ...extra, ''].join('\n'))
}

/** Whether stdin is a terminal; node:tty (some ms to load) is asked only when stdin is a
 * character device other than /dev/null, so a pipe, a file or `</dev/null` costs nothing. */
function stdinIsTerminal() {
  try {
    const stdin = fstatSync(0)
    if (!stdin.isCharacterDevice()) return false
    if (process.platform !== 'win32' && stdin.rdev === statSync('/dev/null').rdev) return false
  } catch {
    return false
  }
  return require('node:tty').isatty(0)
}

/** Runs the command in the folder's running sandbox, checked against the image recipe and run
 * flags it was made with (unless the command line names an image): never another one. */
async function exec(addon, opts, ws) {
  const layer = layerFor(addon, opts)
  // `pi`: the image's own, else the host's copied in (bin/pi-in-sandbox.js).
  const argv = process.argv.slice(2)
  const command = opts.rest[0] === 'pi' ? await require('./pi-in-sandbox.js').piCommand(opts.rest.slice(1), argv.slice(0, argv.indexOf('--'))) : opts.rest
  const code = await layer.containers.exec(ws.id, command, { path: ws.path, tty: stdinIsTerminal() })
  return code < 0 ? EXEC_FAILED : code
}

/** `port [dir] <port>[:<host-port>]`, in the foreground: Ctrl-C ends it (0); the sandbox
 * stopping ends it with why (1). The running container is checked against the image recipe
 * and run flags it was made with (unless the command line names an image), as for `exec`. */
async function port(addon, opts, ws, spec) {
  const [inside, host] = spec.split(':').map(Number)
  const layer = layerFor(addon, opts)
  const fwd = await layer.containers.forwardPort(ws.id, inside, { hostPort: host, path: ws.path })
  const said = { url: fwd.url, hostPort: fwd.hostPort, port: fwd.port, workspaceId: fwd.workspaceId, carrier: fwd.carrier }
  if (opts.json) process.stdout.write(`${JSON.stringify({ ok: true, ...said })}\n`)
  else process.stdout.write(`Forwarding ${fwd.url} to port ${inside} in the sandbox of ${ws.path} (Ctrl-C ends it).\n`)
  let stopping = false
  const stop = () => { stopping = true; fwd.close() }
  process.once('SIGINT', stop)
  process.once('SIGTERM', stop)
  const { reason } = await fwd.wait()
  if (stopping) return 0
  if (opts.json) process.stdout.write(`${JSON.stringify({ ok: false, ended: reason })}\n`)
  else process.stderr.write(`po-sandbox: the forward of port ${inside} ended: ${shown(String(reason))}\n`)
  return 1
}

/** The base for the demo: the one asked for; else the default when it is on the engine; else
 * the local test base when that is; else the default (the build pulls it). */
async function demoBase(addon, opts, report) {
  if (opts.baseImage || report.image.basePresent !== false) return {}
  const local = await addon.doctor(process.version, { engine: opts.engine, poHome: opts.poHome, baseImage: LOCAL_BASE, imageVariant: 'minimal', demoRuntime: true })
  if (local.image.basePresent !== true) {
    process.stdout.write(`\nThe base image ${report.image.base} is not on this engine: the build will try to pull it. Where no registry can be reached, build a local base first with 'bash scripts/build-test-base-image.sh' (as 'npm test' does) and run this again.\n`)
    return {}
  }
  process.stdout.write(`\nThe base image ${report.image.base} is not on this engine (and this machine may reach no registry to pull it from): using the local base image ${LOCAL_BASE} that 'npm test' builds (scripts/build-test-base-image.sh), with the minimal recipe.\n`)
  return { baseImage: LOCAL_BASE, imageVariant: 'minimal' }
}

/** Reads the demo server's own report of where it runs (what `/po-sandbox` reports, and more). */
async function demoStatus(url) {
  const health = await fetch(`${url}/api/health`)
  if (!health.ok) throw coded('CONTAINER_UNHEALTHY', `The demo server at ${url} answered its health path with ${health.status}.`)
  const res = await fetch(`${url}/api/status`)
  if (!res.ok) throw coded('CONTAINER_UNHEALTHY', `The demo server at ${url} answered /api/status with ${res.status}.`)
  return res.json()
}

function containedText(s) {
  const caps = /^0+$/.test(s.privileges.effectiveCapabilities ?? '') ? 'no capabilities' : `capabilities ${s.privileges.effectiveCapabilities}`
  return `Inside, the demo server reports: contained (PO_SANDBOX=1), workspace ${s.workspace}, uid ${s.user.uid}, ${caps}, no-new-privileges ${s.privileges.noNewPrivileges}, pid limit ${s.limits.pids}.\n`
}

/** pi's own `/po-sandbox`, run by the real pi inside the demo sandbox; a line saying why not
 * when this host has no pi to copy in. */
async function piReport(opts, folder, ws) {
  const head = ['exec', folder, '--po-home', opts.poHome]
  for (const [flag, value] of [['--engine', opts.engine], ['--base-image', opts.baseImage], ['--image-variant', opts.imageVariant]]) if (value) head.push(flag, value)
  let message
  try {
    message = await require('./pi-in-sandbox.js').poSandboxInPi(head)
  } catch (err) {
    if (err.code === 'PI_NOT_FOUND') return `pi's /po-sandbox not run inside: ${err.message}\n`
    throw err
  }
  if (!message.includes(`runs inside a sandbox container, for workspace "${ws.id}"`)) throw coded('CONTAINER_FAILED', `pi's /po-sandbox inside the demo sandbox does not say it is contained: ${message}`)
  return `Inside, pi's /po-sandbox says: ${message.split('\n')[0]}\n`
}

/** `npm start`: doctor, then up / check / down of a throw-away folder on the demo bundle. */
async function demo(addon, opts) {
  const report = await addon.doctor(process.version, { engine: opts.engine, poHome: opts.poHome, baseImage: opts.baseImage, imageVariant: opts.imageVariant, demoRuntime: true })
  process.stdout.write(report.text)
  if (!report.ok) return 1
  const base = await demoBase(addon, opts, report)
  // A throw-away folder and Po home: the demo bundle is used even where Po's is installed, and
  // nothing of a real Po home is touched.
  const scratch = mkdtempSync(path.join(os.tmpdir(), 'po-sandbox-demo-'))
  const folder = path.join(scratch, 'demo-workspace')
  mkdirSync(folder)
  const demoOpts = { ...opts, ...base, poHome: path.join(scratch, 'po-home'), json: false }
  const ws = addon.workspaceForFolder(folder)
  let starting
  let cleaning
  // Once, also when Ctrl-C comes first: after the start settles, so nothing it creates stays.
  const cleanUp = () => (cleaning ??= (async () => {
    await starting?.catch(() => {})
    try {
      await down(addon, demoOpts, ws, true)
    } finally {
      rmSync(scratch, { recursive: true, force: true })
    }
  })())
  let interrupting = false
  // A second Ctrl-C while cleaning up does not cut the clean-up short.
  const interrupted = () => {
    if (interrupting) return
    interrupting = true
    process.stderr.write('\nInterrupted: removing the throw-away sandbox...\n')
    cleanUp().finally(() => process.exit(130))
  }
  process.on('SIGINT', interrupted)
  try {
    process.stdout.write(`\nBringing up a throw-away sandbox for ${folder} (workspace ${ws.id})...\n`)
    starting = up(addon, demoOpts, ws)
    const { container } = await starting
    const status = await demoStatus(container.url)
    if (status.contained !== true || status.workspace !== ws.id || status.bundle !== 'demo') {
      throw coded('CONTAINER_FAILED', `The demo server does not report a contained demo sandbox for ${ws.id}: ${JSON.stringify({ contained: status.contained, workspace: status.workspace, bundle: status.bundle })}`)
    }
    process.stdout.write(containedText(status))
    process.stdout.write(await piReport(demoOpts, folder, ws))
  } finally {
    await cleanUp()
    process.removeListener('SIGINT', interrupted)
  }
  process.stdout.write('\nThe sandbox layer works on this machine.\n')
  return 0
}

function report(err, opts, failed) {
  if (opts.json) process.stdout.write(`${JSON.stringify({ ok: false, error: { code: err.code, message: err.message } }, null, 2)}\n`)
  else process.stderr.write(`po-sandbox: ${shown(String(err.message))} [${shown(String(err.code))}]\n`)
  return failed
}

/** Runs up, down, exec, review or demo; resolves with the exit code. */
async function folderCommand(addon, opts) {
  const failed = opts.command === 'exec' ? EXEC_FAILED : 1
  try {
    if (opts.command === 'demo') return await demo(addon, opts)
    const folder = opts.command === 'port' && opts.args.length === 1 ? '.' : opts.args[0]
    const ws = addon.workspaceForFolder(path.resolve(folder ?? '.'))
    if (opts.command === 'up') return (await up(addon, opts, ws), 0)
    if (opts.command === 'down') return (await down(addon, opts, ws), 0)
    if (opts.command === 'review') return (await review(addon, opts, ws), 0)
    if (opts.command === 'diff' || opts.command === 'apply') return (await cloneWork(addon, opts, ws), 0)
    if (opts.command === 'port') return await port(addon, opts, ws, opts.args.at(-1))
    return await exec(addon, opts, ws)
  } catch (err) {
    return report(err, opts, failed)
  }
}

module.exports = { folderCommand, shown }
