// The po-sandbox CLI (bin/po-sandbox.js) and `npm start`.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { execFileSync } from 'node:child_process'
import { mkdirSync, readdirSync, readFileSync, realpathSync, symlinkSync, writeFileSync } from 'node:fs'
import path from 'node:path'

import { dockerCli, isolatedEnv, requireDocker, root, run, tempDir } from './helpers.mjs'

const bin = path.join(root, 'bin', 'po-sandbox.js')

/** A Po home with a valid runtime bundle. */
function poHomeWithBundle(t) {
  const home = tempDir(t)
  const dir = path.join(home, 'container-runtime', '1.2.0')
  mkdirSync(dir, { recursive: true })
  writeFileSync(path.join(dir, 'container-runtime.json'), JSON.stringify({ entry: '/opt/po/server.js', port: 7300 }))
  return home
}

test('doctor on this machine: ready, exit 0, every candidate, the engine, the runtime and the image', async (t) => {
  await requireDocker()
  const home = poHomeWithBundle(t)
  const r = await run(process.execPath, [bin, 'doctor', '--timeout-ms', '30000', '--po-home', home, '--base-image', 'po-sandbox-test-base:node24-nft', '--image-variant', 'minimal'])
  assert.equal(r.code, 0, r.stdout + r.stderr)
  assert.match(r.stdout, new RegExp(`Node.js   ${process.version.replace(/\./g, '\\.')}: ok`))
  assert.match(r.stdout, /\[ok\] docker   unix:\/\/\/var\/run\/docker\.sock \(rootful\): Docker /)
  for (const engine of ['podman', 'nerdctl', 'finch']) assert.match(r.stdout, new RegExp(`\\] ${engine} `))
  assert.match(r.stdout, /Engine    docker .* at unix:\/\/\/var\/run\/docker\.sock/)
  assert.match(r.stdout, new RegExp(`Runtime   1\\.2\\.0 in ${home}/container-runtime: ok`))
  assert.match(r.stdout, /Image     po-sandbox:[0-9a-f]{24} \(minimal recipe on po-sandbox-test-base:node24-nft [0-9a-f]{12}, made (today|1 day ago|\d+ days ago)\)/)
  // Docker before 28 (this machine's Debian docker.io) lets the LAN in (moby #45610): a warning
  // that names what the holders' input rules cover; none from 28 on.
  const version = r.stdout.match(/Engine    docker (\S+) at/)[1]
  const lan = /Warning   Docker \S+ \(before 28\.0\) lets hosts on this machine's network segment reach .*moby #45610.*drops every inbound connection but the server's port/
  if (Number(version.split('.')[0]) < 28) assert.match(r.stdout, lan)
  else assert.doesNotMatch(r.stdout, lan)
  assert.match(r.stdout, /Result    ready/)
})

test('doctor without a runtime bundle: exit 1, RUNTIME_NOT_INSTALLED and where it looked', async (t) => {
  await requireDocker()
  const home = tempDir(t)
  const r = await run(process.execPath, [bin, 'doctor', '--timeout-ms', '30000', '--po-home', home])
  assert.equal(r.code, 1)
  assert.match(r.stdout, /Runtime   not usable \[RUNTIME_NOT_INSTALLED\]/)
  assert.match(r.stdout, new RegExp(`${home}/container-runtime/`))
  assert.match(r.stdout, /Result    not ready: install the runtime bundle/)
})

test('ls and stop: a container of this hub is listed, stopped and gone; --all lists every hub', async (t) => {
  await requireDocker()
  const home = poHomeWithBundle(t)
  const owner = `cli${Math.random().toString(16).slice(2, 10)}`
  const name = `po-${owner}-cliws`
  t.after(() => { try { dockerCli(['rm', '-f', name]) } catch {} })
  // A container as the provider labels them, made directly so this test needs no runtime.
  dockerCli(['run', '-d', '--name', name, '--label', 'po.sandbox=1', '--label', `po.owner=${owner}`, '--label', 'po.workspace=cliws', '-p', '127.0.0.1::7300', '--init', 'po-sandbox-test-base:node24-nft', 'sleep', '600'])
  const ls = await run(process.execPath, [bin, 'ls', '--po-home', home, '--owner', owner])
  assert.equal(ls.code, 0, ls.stderr)
  assert.match(ls.stdout, /^WORKSPACE +STATE +PORT +IMAGE +AGE +NAME/m)
  assert.match(ls.stdout, new RegExp(`^cliws +running +127\\.0\\.0\\.1:\\d+ +po-sandbox-test-base:node24-nft +\\d+s +${name}$`, 'm'))
  const all = await run(process.execPath, [bin, 'ls', '--all', '--json'])
  assert.ok(JSON.parse(all.stdout).some((row) => row.owner === owner && row.workspaceId === 'cliws'))
  const other = await run(process.execPath, [bin, 'ls', '--po-home', home])
  assert.doesNotMatch(other.stdout, /cliws/)
  const stop = await run(process.execPath, [bin, 'stop', 'cliws', '--po-home', home, '--owner', owner])
  assert.equal(stop.code, 0, stop.stderr)
  assert.match(stop.stdout, /Stopped and removed: cliws \(volumes kept\)/)
  assert.equal(dockerCli(['ps', '-aq', '--filter', `name=${name}`]), '')
  const again = await run(process.execPath, [bin, 'stop', 'cliws', '--po-home', home, '--owner', owner])
  assert.match(again.stdout, /has no container of this hub/)
  const bad = await run(process.execPath, [bin, 'stop', '../x', '--po-home', home])
  assert.equal(bad.code, 1)
  assert.match(bad.stderr, /WORKSPACE_INVALID/)
})

test('doctor --json is machine-readable', async (t) => {
  await requireDocker()
  const r = await run(process.execPath, [bin, 'doctor', '--json', '--timeout-ms', '30000', '--po-home', poHomeWithBundle(t)])
  assert.equal(r.code, 0, r.stderr)
  const report = JSON.parse(r.stdout)
  assert.equal(report.ok, true)
  assert.equal(report.node.version, process.version)
  assert.equal(report.engine.available, true)
  assert.ok(report.engine.candidates.length >= 4)
  assert.equal(report.runtime.ok, true)
  assert.equal(report.runtime.version, '1.2.0')
  assert.match(report.image.tag, /^po-sandbox:[0-9a-f]{24}$/)
})

test('doctor without an engine: exit 1 and the reason', async (t) => {
  const dir = tempDir(t)
  const env = { ...isolatedEnv(dir, { DOCKER_HOST: `unix://${dir}/docker.sock`, PO_SANDBOX_ENGINE: 'docker' }), PATH: process.env.PATH }
  const r = await run(process.execPath, [bin, 'doctor'], { env })
  assert.equal(r.code, 1)
  assert.match(r.stdout, /Engine    none usable \[ENGINE_NOT_INSTALLED\]/)
  assert.match(r.stdout, /Result    not ready/)
})

test('doctor with PO_SANDBOX_ENGINE=bogus: exit 1 with the coded error', async () => {
  const r = await run(process.execPath, [bin, 'doctor', '--json'], { env: { ...process.env, PO_SANDBOX_ENGINE: 'bogus' } })
  assert.equal(r.code, 1)
  const out = JSON.parse(r.stdout)
  assert.equal(out.error.code, 'ENGINE_UNKNOWN')
})

test('port checks the port before looking for the sandbox: out of range is a usage error (exit 2), a good one on a folder with none is SANDBOX_NOT_RUNNING', async (t) => {
  const dir = tempDir(t)
  const home = ['--po-home', path.join(dir, 'po-home')]
  for (const [spec, named] of [['0', 'port: 0 is not'], ['70000', 'port: 70000 is not'], ['5173:70000', 'host port 70000 is not']]) {
    const r = await run(process.execPath, [bin, 'port', dir, spec, ...home])
    assert.equal(r.code, 2, `${spec}: ${r.stderr}`)
    assert.ok(r.stderr.includes(named), r.stderr)
    assert.doesNotMatch(r.stderr, /SANDBOX_NOT_RUNNING/)
  }
  const none = await run(process.execPath, [bin, 'port', dir, '5173', ...home])
  assert.equal(none.code, 1, none.stderr)
  assert.match(none.stderr, /SANDBOX_NOT_RUNNING/)
  assert.ok(none.stderr.includes(`po-sandbox up ${realpathSync(dir)}`), none.stderr)
})

test('usage errors exit 2 and print the usage', async () => {
  for (const args of [['frobnicate'], ['doctor', '--timeout-ms', 'soon'], ['doctor', '--nope'], ['stop'], ['stop', 'a', 'b'], ['ls', 'x'], ['doctor', '--'], ['stop', '-'], ['doctor', '--json=yes'], ['policy'], ['policy', 'remove'], ['policy', 'show', 'x'], ['policy', 'init'], ['policy', 'show', '--workspace', 'w'], ['policy', 'log', '.', '--workspace', 'w'], ['allow'], ['allow', 'a.test', '.', '--workspace', 'w'], ['ls', '--workspace', 'w']]) {
    const r = await run(process.execPath, [bin, ...args])
    assert.equal(r.code, 2, args.join(' '))
    assert.match(r.stderr, /Usage: po-sandbox/)
  }
  const help = await run(process.execPath, [bin, '--help'])
  assert.equal(help.code, 0)
  assert.match(help.stdout, /doctor/)
})

test('npm start runs the demo (doctor, then up, check and down of a throw-away sandbox; first-run.test.mjs runs it)', () => {
  const pkg = JSON.parse(readFileSync(path.join(root, 'package.json'), 'utf8'))
  assert.equal(pkg.scripts.start, 'node bin/po-sandbox.js demo')
  assert.equal(pkg.bin['po-sandbox'], 'bin/po-sandbox.js')
})

test('PO_SANDBOX_LOG turns on tracing to stderr; without it stderr stays quiet', async () => {
  const quiet = await run(process.execPath, [bin, 'doctor', '--engine', 'docker', '--timeout-ms', '30000'], { env: { ...process.env, PO_SANDBOX_LOG: '' } })
  assert.equal(quiet.stderr, '')
  const loud = await run(process.execPath, [bin, 'doctor', '--engine', 'docker', '--timeout-ms', '30000'], { env: { ...process.env, PO_SANDBOX_LOG: 'debug' } })
  assert.match(loud.stderr, /engine candidate probed/)
})

test('doctor follows the Docker context the docker CLI would use, and says which answered', async (t) => {
  await requireDocker()
  // A docker CLI config of its own whose current context reaches this machine's dockerd
  // through a path only this test knows: a link to the real socket.
  const config = tempDir(t)
  const link = path.join(config, 'engine.sock')
  symlinkSync('/var/run/docker.sock', link)
  const cliEnv = { ...process.env, DOCKER_CONFIG: config }
  delete cliEnv.DOCKER_HOST
  delete cliEnv.DOCKER_CONTEXT
  // The real docker CLI writes the context, so its file layout is the one read.
  execFileSync('docker', ['context', 'create', 'po-test-ctx', '--docker', `host=unix://${link}`], { env: cliEnv, stdio: 'ignore' })
  execFileSync('docker', ['context', 'use', 'po-test-ctx'], { env: cliEnv, stdio: 'ignore' })
  assert.equal(JSON.parse(readFileSync(path.join(config, 'config.json'), 'utf8')).currentContext, 'po-test-ctx')
  const home = poHomeWithBundle(t)
  const args = [bin, 'doctor', '--engine', 'docker', '--timeout-ms', '30000', '--po-home', home]
  const r = await run(process.execPath, args, { env: cliEnv })
  assert.equal(r.code, 0, r.stdout + r.stderr)
  assert.match(r.stdout, new RegExp(`\\[ok\\] docker   unix://${link.replace(/[.]/g, '\\.')} \\(currentContext po-test-ctx\\): Docker `))
  assert.match(r.stdout, /Engine    docker .* at unix:\/\/.*engine\.sock\n.*\n          Docker context po-test-ctx \(currentContext\)/)
  const json = JSON.parse((await run(process.execPath, [...args, '--json'], { env: cliEnv })).stdout)
  assert.equal(json.engine.available, true)
  assert.equal(json.engine.context, 'po-test-ctx')
  assert.equal(json.engine.source, 'currentContext')
  assert.equal(json.engine.endpoint, `unix://${link}`)
  assert.deepEqual(json.engine.candidates.map((c) => [c.source, c.context]), [['currentContext', 'po-test-ctx']])
  // DOCKER_CONTEXT=default overrides the config's choice: the defaults, no context.
  const byDefault = JSON.parse((await run(process.execPath, [...args, '--json'], { env: { ...cliEnv, DOCKER_CONTEXT: 'default' } })).stdout)
  assert.equal(byDefault.engine.endpoint, 'unix:///var/run/docker.sock')
  assert.equal(byDefault.engine.context, undefined)
  // A context that does not exist: the coded error names it and the fix, exit 1.
  const missing = await run(process.execPath, [...args, '--json'], { env: { ...cliEnv, DOCKER_CONTEXT: 'nope' } })
  assert.equal(missing.code, 1)
  const err = JSON.parse(missing.stdout).error
  assert.equal(err.code, 'ENGINE_CONTEXT_INVALID')
  assert.match(err.message, /the Docker context 'nope' \(from DOCKER_CONTEXT=nope\) does not exist/)
  assert.match(err.message, /docker context ls/)
})

test('up, exec and down refuse the root folder, the home folder and a folder containing it, before any engine is asked', async (t) => {
  const dir = tempDir(t)
  const home = path.join(dir, 'home')
  mkdirSync(home)
  symlinkSync(home, path.join(dir, 'link-to-home'))
  // No engine at this address: a refusal names the folder, not the engine.
  const env = { ...process.env, HOME: home, DOCKER_HOST: `unix://${path.join(dir, 'none.sock')}` }
  for (const [args, re] of [
    [['up', '/'], /it is the root folder/],
    [['up', home], /it is your home folder/],
    [['up', path.join(dir, 'link-to-home')], /it is your home folder/],
    [['up', dir], /it contains your home folder/],
    [['exec', home, '--', 'true'], /it is your home folder/],
    [['down', home], /it is your home folder/],
  ]) {
    const r = await run(process.execPath, [bin, ...args, '--po-home', path.join(dir, 'po')], { env })
    assert.notEqual(r.code, 0, `${args.join(' ')}: ${r.stdout}`)
    assert.match(r.stderr, /WORKSPACE_INVALID/, args.join(' '))
    assert.match(r.stderr, re, args.join(' '))
    assert.doesNotMatch(r.stderr, /ENGINE_/, args.join(' '))
  }
  assert.deepEqual(readdirSync(dir).sort(), ['home', 'link-to-home'], 'no Po home or anything else made')
  // A project folder inside the home folder is fine as far as the folder goes (it gets to the engine).
  const project = path.join(home, 'code')
  mkdirSync(project)
  const ok = await run(process.execPath, [bin, 'down', project, '--po-home', path.join(dir, 'po')], { env })
  assert.doesNotMatch(ok.stderr, /WORKSPACE_INVALID/)
})

test('text reaching the terminal on the error path shows its control characters escaped (a folder name, an error message), and --json keeps them as JSON does', async (t) => {
  const dir = tempDir(t)
  const home = ['--po-home', path.join(dir, 'po-home')]
  // A folder whose name retitles the window and writes the clipboard when printed raw.
  const evil = path.join(dir, 'x\x1b]0;pwned\x07\x1b]52;c;ZXZpbA==\x07\x9b2J')
  mkdirSync(evil)
  for (const command of ['review', 'port', 'exec', 'diff']) {
    const args = { review: [evil], port: [evil, '5173'], exec: [evil, '--', 'true'], diff: [evil] }[command]
    const r = await run(process.execPath, [bin, command, ...args, ...home])
    assert.notEqual(r.code, 0, `${command}: ${r.stdout}${r.stderr}`)
    assert.doesNotMatch(r.stderr, /[\x00-\x08\x0b-\x1f\x7f-\x9f]/, `${command}: a control character reached the terminal: ${JSON.stringify(r.stderr)}`)
    // Where the message names the folder (SANDBOX_NOT_RUNNING says to run up on it), escaped.
    if (command === 'port' || command === 'exec') assert.ok(r.stderr.includes('x\\x1b]0;pwned\\x07'), `${command}: ${r.stderr}`)
  }
  const json = await run(process.execPath, [bin, 'port', evil, '5173', '--json', ...home])
  const out = JSON.parse(json.stdout)
  assert.ok(out.error.message.includes('\x1b]0;pwned'), 'JSON carries the text, escaped by JSON itself')
  // A usage error naming the argument.
  const usage = await run(process.execPath, [bin, 'port', evil, '\x1b[31m'])
  assert.equal(usage.code, 2)
  assert.doesNotMatch(usage.stderr, /[\x00-\x08\x0b-\x1f\x7f-\x9f]/, JSON.stringify(usage.stderr))
})
