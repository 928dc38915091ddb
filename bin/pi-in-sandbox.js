'use strict'
// `po-sandbox exec [dir] -- pi …`: the real pi inside the workspace's container, with this
// package's extension loaded (it routes brokered providers through the broker bridge).
//
// When the image has its own `pi` on PATH, that one runs. Otherwise the host's pi (its bundle
// and its extension loader, jiti) and this package (manifest, index.js, extensions/ and the
// Linux addon for the container's architecture) are copied once into the container's home
// volume, under /po-home/.po-sandbox/pi/<key>/<arch>, where <key> is the sha256 of what is
// copied: a later run, or another container on the same volume, reuses it; a new pi or package
// version gets a new folder. The copy goes through `exec` itself (a small Node extractor in
// the container reads it on stdin), so it is written as the container's user, and it appears
// whole or not at all (written to a temporary folder, then renamed).

const { createHash, randomBytes } = require('node:crypto')
const { spawn } = require('node:child_process')
const { createRequire } = require('node:module')
const { existsSync, readdirSync, readFileSync, realpathSync, statSync } = require('node:fs')
const path = require('node:path')

/** Where copies of pi live in the container (the home volume, kept across containers). */
const PI_ROOT = '/po-home/.po-sandbox/pi'
const PI_PACKAGE = '@earendil-works/pi-coding-agent'
/** Container `uname -m` -> napi-rs platform suffix. */
const ARCHES = { x86_64: 'linux-x64-gnu', aarch64: 'linux-arm64-gnu', arm64: 'linux-arm64-gnu' }
const packageRoot = path.join(__dirname, '..')

function coded(code, message) {
  return Object.assign(new Error(message), { code })
}

/** The folder of the host's pi package: in a node_modules this package can see, else the
 * package of the `pi` on PATH. */
function hostPi() {
  // Node's own lookup, by folder: pi's exports do not include its package.json.
  for (let d = packageRoot; d !== path.dirname(d); d = path.dirname(d)) {
    const dir = path.join(d, 'node_modules', ...PI_PACKAGE.split('/'))
    if (existsSync(path.join(dir, 'package.json'))) return dir
  }
  for (const dir of (process.env.PATH ?? '').split(path.delimiter).filter(Boolean)) {
    const bin = path.join(dir, 'pi')
    if (!existsSync(bin)) continue
    // npm links bin/pi to <pkg>/dist/bundle/cli.js (or dist/cli.js): walk up to the package.
    for (let d = path.dirname(realpathSync(bin)); d !== path.dirname(d); d = path.dirname(d)) {
      const manifest = path.join(d, 'package.json')
      if (existsSync(manifest) && JSON.parse(readFileSync(manifest, 'utf8')).name === PI_PACKAGE) return d
    }
  }
  throw coded('PI_NOT_FOUND', `The image has no \`pi\` and none is installed on this host to copy in: install it (npm install -g ${PI_PACKAGE}) and run this again, or use an image that has pi on its PATH.`)
}

/** Every regular file under `dir`, as [path inside the copy, host path], sorted. */
function filesUnder(dir, as) {
  const out = []
  for (const entry of readdirSync(dir, { withFileTypes: true }).sort((a, b) => a.name.localeCompare(b.name))) {
    const host = path.join(dir, entry.name)
    const inside = `${as}/${entry.name}`
    if (entry.isDirectory()) out.push(...filesUnder(host, inside))
    else if (entry.isFile()) out.push([inside, host])
  }
  return out
}

/** The Linux addon of this package for `platform` (e.g. linux-x64-gnu), or undefined. */
function linuxAddon(platform) {
  const beside = path.join(packageRoot, `po-sandbox.${platform}.node`)
  if (existsSync(beside)) return beside
  try {
    const req = createRequire(path.join(packageRoot, 'package.json'))
    const dir = path.dirname(req.resolve(`@agimon-ai/po-sandbox-${platform}/package.json`))
    const node = readdirSync(dir).find((n) => n.endsWith('.node'))
    return node && path.join(dir, node)
  } catch {
    return undefined
  }
}

/** What is copied for a container of architecture `arch` (uname -m): [[inside, host], …]. */
function payloadFiles(arch) {
  const platform = ARCHES[arch]
  if (!platform) throw coded('PI_NOT_FOUND', `The container's architecture ${arch} has no build of this package: run pi from an image that has it on its PATH.`)
  const addon = linuxAddon(platform)
  if (!addon) throw coded('PI_NOT_FOUND', `This package has no ${platform} addon to load its extension in the container (install @agimon-ai/po-sandbox-${platform} beside it) or use an image that has pi on its PATH.`)
  const pi = hostPi()
  const jiti = path.dirname(createRequire(path.join(pi, 'package.json')).resolve('jiti/package.json'))
  return [
    ['pi/package.json', path.join(pi, 'package.json')],
    ...filesUnder(path.join(pi, 'dist', 'bundle'), 'pi/dist/bundle'),
    ...filesUnder(jiti, 'pi/node_modules/jiti'),
    ['pkg/package.json', path.join(packageRoot, 'package.json')],
    ['pkg/index.js', path.join(packageRoot, 'index.js')],
    ...filesUnder(path.join(packageRoot, 'extensions'), 'pkg/extensions'),
    [`pkg/po-sandbox.${platform}.node`, addon],
  ]
}

/** The copy's folder name: the sha256 (16 hex) of every copied file's name and bytes. */
function payloadKey(files) {
  const h = createHash('sha256')
  for (const [inside, host] of files) {
    const bytes = readFileSync(host)
    h.update(`${inside}\0${bytes.length}\0`).update(bytes)
  }
  return h.digest('hex').slice(0, 16)
}

/** The stream the extractor reads: per file a 4-byte length, a JSON head {p, m, s}, the bytes. */
function payloadStream(files) {
  const parts = []
  for (const [inside, host] of files) {
    const bytes = readFileSync(host)
    const head = Buffer.from(JSON.stringify({ p: inside, m: statSync(host).mode & 0o755, s: bytes.length }))
    const len = Buffer.alloc(4)
    len.writeUInt32BE(head.length)
    parts.push(len, head, bytes)
  }
  return Buffer.concat(parts)
}

/** Runs in the container: removes the argv[1].tmp-* folders a killed copy left (older than 10
 * minutes, longer than any copy takes; links are not followed), reads payloadStream on stdin into
 * argv[1].tmp-<random>, then renames it to argv[1] (unless a concurrent copy got there first)
 * and marks it complete. */
const EXTRACTOR = `
const fs=require('fs'),path=require('path');const dest=process.argv[1],tmp=dest+'.tmp-'+process.argv[2]
const dir=path.dirname(dest),aside=path.basename(dest)+'.tmp-'
try{for(const n of fs.readdirSync(dir)){const p=path.join(dir,n),s=fs.lstatSync(p);if(n.startsWith(aside)&&s.isDirectory()&&Date.now()-s.mtimeMs>600000)fs.rmSync(p,{recursive:true,force:true})}}catch{}
const chunks=[];process.stdin.on('data',(c)=>chunks.push(c)).on('end',()=>{
const b=Buffer.concat(chunks);let o=0
while(o<b.length){const n=b.readUInt32BE(o);const h=JSON.parse(b.subarray(o+4,o+4+n));o+=4+n
if(h.p.split('/').some((s)=>s===''||s==='.'||s==='..'))throw new Error('bad path '+h.p)
const f=path.join(tmp,h.p);fs.mkdirSync(path.dirname(f),{recursive:true});fs.writeFileSync(f,b.subarray(o,o+h.s),{mode:h.m});o+=h.s}
fs.writeFileSync(path.join(tmp,'.complete'),'');fs.mkdirSync(path.dirname(dest),{recursive:true})
try{fs.renameSync(tmp,dest)}catch(e){fs.rmSync(tmp,{recursive:true,force:true});if(!fs.existsSync(path.join(dest,'.complete')))throw e}})`

/** This CLI's `exec` with `head` (the arguments before `--`: `exec`, the folder, options) and
 * `command`, stdout captured, `input` on stdin; resolves with { code, stdout, stderr }. */
/** `po-sandbox <head…> -- <command…>` as a child of this process, every stream piped. */
function spawnExec(head, command) {
  return spawn(process.execPath, [path.join(__dirname, 'po-sandbox.js'), ...head, '--', ...command], { stdio: ['pipe', 'pipe', 'pipe'] })
}

function execChild(head, command, input) {
  return new Promise((resolve, reject) => {
    const child = spawnExec(head, command)
    let stdout = ''
    let stderr = ''
    child.stdout.on('data', (d) => { stdout += d })
    child.stderr.on('data', (d) => { stderr += d })
    child.on('error', reject)
    child.on('close', (code) => resolve({ code, stdout, stderr }))
    child.stdin.on('error', () => {})
    child.stdin.end(input)
  })
}

/** What the container has: its architecture, and the path of its own pi (or ''). */
async function probe(head) {
  const r = await execChild(head, ['sh', '-c', 'uname -m; command -v pi || true'])
  if (r.code !== 0) throw coded(r.stderr.match(/\[([A-Z_]+)\]\s*$/)?.[1] ?? 'CONTAINER_FAILED', r.stderr.trim() || `probing the container failed (exit ${r.code})`)
  const [arch = '', own = ''] = r.stdout.split('\n').map((l) => l.trim())
  return { arch, own }
}

/** The command that runs pi with `args` in the container of `head` (this CLI's `exec`
 * arguments before `--`): its own pi, or the copied one (copied first when missing). */
async function piCommand(args, head) {
  const { arch, own } = await probe(head)
  if (own) return [own, ...args]
  const files = payloadFiles(arch)
  const dir = `${PI_ROOT}/${payloadKey(files)}/${arch}`
  const run = ['sh', '-c', 'exec node "$0/pi/dist/bundle/cli.js" --extension "$0/pkg" "$@"', dir, ...args]
  const present = await execChild(head, ['test', '-f', `${dir}/.complete`])
  if (present.code === 0) return run
  process.stderr.write(`Copying pi into the sandbox's home volume (once per pi and package version)...\n`)
  const copied = await execChild(head, ['node', '-e', EXTRACTOR, dir, randomBytes(6).toString('hex')], payloadStream(files))
  if (copied.code !== 0) throw coded('CONTAINER_FAILED', `Copying pi into the container failed (exit ${copied.code}): ${copied.stderr.trim()}`)
  return run
}

/** Runs `/po-sandbox` in the real pi inside the container of `head` (RPC mode) and resolves
 * with the message pi's extension shows; rejects with pi's output when none comes in 60 s. */
async function poSandboxInPi(head) {
  const command = await piCommand(['--mode', 'rpc', '--no-session'], head)
  const child = spawnExec(head, command)
  let stdout = ''
  let stderr = ''
  child.stderr.on('data', (d) => { stderr += d })
  child.stdin.on('error', () => {})
  const message = new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(coded('CONTAINER_FAILED', `pi inside the sandbox showed nothing for /po-sandbox within 60 s: ${stdout.slice(-2000)}${stderr.slice(-2000)}`)), 60000)
    child.stdout.on('data', (d) => {
      stdout += d
      for (const line of stdout.split('\n')) {
        let msg
        try { msg = JSON.parse(line) } catch { continue }
        if (msg.type === 'extension_ui_request' && msg.method === 'notify') { clearTimeout(timer); resolve(msg.message) }
      }
    })
    child.on('close', (code) => { clearTimeout(timer); reject(coded('CONTAINER_FAILED', `pi inside the sandbox exited (${code}) before answering /po-sandbox: ${stderr.slice(-2000)}`)) })
  })
  child.stdin.write(`${JSON.stringify({ type: 'prompt', message: '/po-sandbox' })}\n`)
  try {
    return await message
  } finally {
    // pi's RPC mode ends with its input.
    child.stdin.end()
    const exited = new Promise((resolve) => child.once('close', resolve))
    if (child.exitCode === null && (await Promise.race([exited, new Promise((r) => setTimeout(() => r('late'), 5000))])) === 'late') child.kill()
  }
}

module.exports = { piCommand, poSandboxInPi, payloadFiles, payloadKey, PI_ROOT }
