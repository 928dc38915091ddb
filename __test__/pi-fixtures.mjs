// The real pi coding agent inside containers: a runtime bundle that ships pi and this package's
// extension, a driver that runs pi in RPC mode there, and its answers.
import { execFileSync } from 'node:child_process'
import { cpSync, mkdirSync, readdirSync } from 'node:fs'
import path from 'node:path'

import { root, run } from './helpers.mjs'

/**
 * Runs in a container: the real pi in RPC mode with the extension in `EXTENSION` (a package
 * folder), sending each of `COMMANDS` after the previous one's answer (after a prompt that
 * started a run, once pi reports `agent_settled`: the model call is over); prints pi's lines.
 * A command `{ type: 'await_notify', match }` is not sent: the driver waits (at most 20 s) for
 * a notify UI request whose message contains `match` (also one that came before it).
 */
export const PI_DRIVER = String.raw`
const { spawn } = require('node:child_process')
const commands = JSON.parse(process.env.COMMANDS), NL = String.fromCharCode(10)
const pi = spawn('node', [process.env.PI, '--mode', 'rpc', '--no-session', '--extension', process.env.EXTENSION], { stdio: ['pipe', 'pipe', 'inherit'] })
let buf = '', sent = 0, pending = null, awaiting = null
const notices = []
const next = () => {
  const c = commands[sent]
  if (c?.type === 'await_notify') { sent++; if (notices.some((n) => n.includes(c.match))) return next(); awaiting = { match: c.match, timer: setTimeout(() => { awaiting = null; next() }, 20000) }; return }
  if (sent < commands.length) { pending = commands[sent].type === 'prompt' ? { answered: false, settled: false } : null; pi.stdin.write(JSON.stringify({ ...commands[sent], id: 'c' + sent }) + NL); sent++ } else pi.stdin.end() }
const onMessage = (m) => {
  if (m.type === 'extension_ui_request' && m.method === 'notify') {
    notices.push(String(m.message))
    if (awaiting && String(m.message).includes(awaiting.match)) { clearTimeout(awaiting.timer); awaiting = null; next() }
    return
  }
  if (m.type === 'response') { if (pending) { pending.answered = true; if (!m.success || m.data?.disposition === 'handled') pending.settled = true } }
  else if (m.type === 'agent_settled' && pending) pending.settled = true
  else return
  if (!pending || (pending.answered && pending.settled)) next()
}
pi.stdout.on('data', (d) => { buf += d; let i; while ((i = buf.indexOf(NL)) >= 0) { const line = buf.slice(0, i); buf = buf.slice(i + 1); console.log(line); let m; try { m = JSON.parse(line) } catch { continue } onMessage(m) } })
setTimeout(next, 100)
setTimeout(() => { pi.kill('SIGKILL'); process.exit(2) }, 60000)
pi.on('close', () => process.exit(0))
`

/** pi's JSON lines in the driver's output. */
export const piLines = (stdout) => stdout.split('\n').filter((l) => l.startsWith('{')).map((l) => JSON.parse(l))

/** The answers (`response` lines) in the driver's output. */
export const piAnswers = (stdout) => piLines(stdout).filter((m) => m.type === 'response')

/**
 * Puts the real pi and this package (its manifest, index.js, the built addon, the extension)
 * into the runtime bundle folder, which every workspace container mounts read-only at /opt/po,
 * as a bundle ships them. node_modules is hard-linked when it can be (same file system; the
 * read-only mount keeps the container from writing through the links), else copied.
 */
export function bundlePiAndExtension(bundle) {
  try {
    execFileSync('cp', ['-al', path.join(root, 'node_modules'), path.join(bundle, 'node_modules')], { stdio: 'pipe' })
  } catch {
    cpSync(path.join(root, 'node_modules'), path.join(bundle, 'node_modules'), { recursive: true, verbatimSymlinks: true })
  }
  const pkg = path.join(bundle, 'node_modules', '@agimon-ai', 'po-sandbox')
  mkdirSync(pkg, { recursive: true })
  const files = ['package.json', 'index.js', ...readdirSync(root).filter((f) => f.endsWith('.node'))]
  for (const f of files) cpSync(path.join(root, f), path.join(pkg, f))
  cpSync(path.join(root, 'extensions'), path.join(pkg, 'extensions'), { recursive: true })
  return { pi: '/opt/po/node_modules/@earendil-works/pi-coding-agent/dist/bundle/cli.js', extension: '/opt/po/node_modules/@agimon-ai/po-sandbox' }
}

/**
 * The real pi in a running workspace container (`docker exec`: the container's user,
 * environment and network namespace), pi and the extension from the bundle (`inBundle`, as
 * `bundlePiAndExtension` returns it), in `workdir`, driven through `commands` by PI_DRIVER.
 * Resolves with the driver's `code`, `stdout` and `stderr`, pi's `answers`, `answer(id)` (the
 * one with that id) and `all` (everything it printed, for assertion messages).
 */
export async function piInContainer(containerId, inBundle, commands, { workdir }) {
  const r = await run('docker', [
    'exec', '-e', 'PI_CODING_AGENT_DIR=/tmp/agent', '-e', 'PI_OFFLINE=1', '-e', 'PI_SKIP_VERSION_CHECK=1', '-e', 'PI_TELEMETRY=0',
    '-e', `COMMANDS=${JSON.stringify(commands)}`, '-e', `PI=${inBundle.pi}`, '-e', `EXTENSION=${inBundle.extension}`,
    '-w', workdir, containerId, 'node', '-e', PI_DRIVER,
  ])
  const answers = piAnswers(r.stdout)
  return {
    ...r,
    answers,
    answer: (id) => answers.find((a) => a.id === id),
    all: `pi in the workspace container:\n${r.stdout}\n${r.stderr}`,
  }
}
