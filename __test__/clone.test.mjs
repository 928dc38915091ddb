// Clone mode on the real Docker engine: the container works on a copy of the folder in a volume of
// its own, filled once through the engine (`po-sandbox up --clone`, `PO_SANDBOX_WORKSPACE_MODE`,
// a workspace's `mode`). A git repository's copy has the same history, the host's uncommitted and
// untracked work, nothing git ignores and none of the host's hooks or config; nothing planted from
// inside reaches the host (its tree, `.git` included, hashes the same); `down` keeps the copy,
// `down --discard` removes it; a folder without git leaves out what `.posandboxignore` lists, and
// its changed files come back with `apply --yes` (host-run ones with `--include-executable`).
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { createHash } from 'node:crypto'
import { existsSync, mkdirSync, readdirSync, readFileSync, statSync, symlinkSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import path from 'node:path'

import { addon, dockerCli, homeOwner, root, run, tempDir } from './helpers.mjs'
import { PLANT, casefoldFolder, git, hostState, parseLines, treeHash } from './clone-fixtures.mjs'
import { baseOptions, containersWith, fakeHost, newOwner, tempHome, useTestBaseImage, volumesOf } from './provider-fixtures.mjs'

const cli = path.join(root, 'bin', 'po-sandbox.js')
const IMAGE = ['--base-image', 'po-sandbox-test-base:node24-nft', '--image-variant', 'minimal']

useTestBaseImage()

function cliEnv(extra = {}) {
  const env = { ...process.env, ...extra }
  for (const k of ['PO_SANDBOX', 'PO_SANDBOX_WORKSPACE_MODE']) if (!(k in extra)) delete env[k]
  return env
}

function po(args, extra = {}) {
  return run(process.execPath, [cli, ...args], { env: cliEnv(extra) })
}

/** The copy volumes of a workspace. */
function copiesOf(wsId) {
  return dockerCli(['volume', 'ls', '-q', '--filter', `label=po.workspace=${wsId}`, '--filter', 'label=po.workspace-copy=1']).split(/\s+/).filter(Boolean)
}

/** A folder and a Po home whose sandbox (container, volumes, copy) goes when the test ends. */
function sandboxFolder(t) {
  const dir = tempDir(t, 'po-clone-')
  const folder = path.join(dir, 'project')
  mkdirSync(folder)
  const poHome = path.join(dir, 'po-home')
  const owner = homeOwner(poHome)
  const ws = addon.workspaceForFolder(folder)
  t.after(() => addon.stopSandboxContainers({ poHome, owner, workspace: ws.id, removeVolumes: true, discard: true }))
  return { folder, poHome, ws }
}

/** A repository with history on two branches and a tag, uncommitted, untracked and ignored work,
 * a hook, and a config holding a remote with a credential and a credential helper. */
async function hostRepository(folder) {
  await git(folder, 'init', '-q', '-b', 'main')
  await git(folder, 'config', 'user.name', 'Ann Person')
  await git(folder, 'config', 'user.email', 'ann@example.invalid')
  writeFileSync(path.join(folder, '.gitignore'), '*.log\n')
  writeFileSync(path.join(folder, 'tracked.txt'), 'committed\n')
  mkdirSync(path.join(folder, '.vscode'))
  writeFileSync(path.join(folder, '.vscode/settings.json'), '{}\n')
  await git(folder, 'add', '.')
  await git(folder, 'commit', '-q', '-m', 'first')
  await git(folder, 'tag', 'v1')
  await git(folder, 'checkout', '-q', '-b', 'feature')
  writeFileSync(path.join(folder, 'feature.txt'), 'feature\n')
  await git(folder, 'add', '.')
  await git(folder, 'commit', '-q', '-m', 'on feature')
  await git(folder, 'checkout', '-q', 'main')
  writeFileSync(path.join(folder, 'tracked.txt'), 'changed on the host\n')
  writeFileSync(path.join(folder, 'untracked.txt'), 'new on the host\n')
  writeFileSync(path.join(folder, 'secret.log'), 'ignored\n')
  // Untracked at guarded paths: the person's own, kept out of the copy.
  writeFileSync(path.join(folder, '.envrc'), 'export API_KEY=host-secret\n')
  writeFileSync(path.join(folder, '.vscode/tasks.json'), '{}\n')
  writeFileSync(path.join(folder, '.git/hooks/pre-commit'), '#!/bin/sh\necho host-hook\n', { mode: 0o755 })
  await git(folder, 'remote', 'add', 'origin', 'https://ann:tok3n@git.example.invalid/ann/project.git')
  await git(folder, 'config', 'credential.helper', 'store')
}

/** What the copy shows from inside, as JSON lines of a shell script. */
const LOOK = `set -e
printf 'log=%s\\n' "$(git log --all --format=%H | sort | tr '\\n' ' ')"
printf 'branches=%s\\n' "$(git branch --format='%(refname:short)' | tr '\\n' ' ')"
printf 'head=%s\\n' "$(git symbolic-ref --short HEAD)"
printf 'tags=%s\\n' "$(git tag | tr '\\n' ' ')"
printf 'status=%s\\n' "$(git status --porcelain | tr '\\n' '|')"
printf 'tracked=%s\\n' "$(cat tracked.txt)"
printf 'ignored=%s\\n' "$(test -e secret.log && echo present || echo absent)"
printf 'guarded=%s\\n' "$(find .envrc .vscode 2>/dev/null | sort | tr '\\n' ' ')"
printf 'hooks=%s\\n' "$(ls .git/hooks 2>/dev/null | tr '\\n' ' ')"
printf 'origin=%s\\n' "$(git config --get remote.origin.url)"
printf 'helper=%s\\n' "$(git config --get credential.helper || true)"
printf 'user=%s <%s>\\n' "$(git config user.name)" "$(git config user.email)"
printf 'mode=%s\\n' "$PO_SANDBOX_WORKSPACE_MODE"
printf 'owner=%s %s\\n' "$(stat -c %u . tracked.txt .git/HEAD | sort -u | tr '\\n' ' ')" "$(id -u)"
`

/** A second commit, an uncommitted change and an untracked file inside; diff shows them; apply
 * brings them to a branch with the same ids, touches nothing else, is a no-op again, refuses a
 * diverged branch and a bad name; --patch writes the uncommitted work as a patch. */
async function takeTheWork(folder, home, ws, agentCommit) {
  // Each apply's bundle folder carries its process's pid: this test's own are looked for (other
  // suites running at once may apply too).
  const pids = []
  const apply = async (args) => {
    const r = await po(['apply', ...args])
    pids.push(r.pid)
    return r
  }
  const work = await po(['exec', folder, ...home, '--', 'sh', '-c', 'echo second > second.txt && git add second.txt && git -c core.hooksPath=/dev/null commit -q -m second && printf "edited\\033]0;retitled\\007\\n" >> tracked.txt && echo note > notes.txt && git rev-parse HEAD'])
  assert.equal(work.code, 0, work.stderr)
  const second = work.stdout.trim()
  const base = await git(folder, 'rev-parse', 'HEAD')
  const d = await po(['diff', folder, '--json', ...home])
  assert.equal(d.code, 0, d.stderr)
  const diff = JSON.parse(d.stdout)
  assert.equal(diff.base, base)
  assert.equal(diff.head, second)
  assert.deepEqual(diff.commits.map((c) => [c.id, c.subject]), [[second, 'second'], [agentCommit, 'agent work']])
  const classed = Object.fromEntries(diff.committed.files.filter((f) => f.class).map((f) => [f.path, f.class]))
  assert.deepEqual(classed, { '.envrc': 'direnv', Makefile: 'makefile', 'package.json': 'package-scripts' })
  assert.match(diff.committed.patch, /\+\{"scripts":\{"postinstall":"echo planted"\}\}/)
  assert.deepEqual(diff.uncommitted.files.map((f) => [f.path, f.change]), [['notes.txt', 'added'], ['tracked.txt', 'modified']])
  assert.match(diff.uncommitted.stat, /2 files changed/)
  const text = await po(['diff', folder, ...home])
  assert.match(text.stdout, /package\.json \(added\)\s+package-scripts: npm/)
  // The agent's text reaches the person's terminal without its control characters.
  assert.ok(!/[\x00-\x08\x0b-\x1f\x7f-\x9f]/.test(text.stdout), 'a control character in diff\'s text')
  assert.ok(text.stdout.includes('+edited\\x1b]0;retitled\\x07'), text.stdout)

  const before = await hostState(folder)
  const branch = `po-sandbox/${ws.id}`
  const a = await apply([folder, '--json', ...home])
  assert.equal(a.code, 0, a.stderr)
  const applied = JSON.parse(a.stdout)
  assert.equal(applied.branch, branch)
  assert.equal(applied.changed, true)
  const log = (await git(folder, 'log', '--format=%H', `${base}..${branch}`)).split('\n')
  assert.deepEqual(log, [applied.uncommittedCommit, second, agentCommit], 'the same ids, the uncommitted work on top')
  assert.match(await git(folder, 'log', '-1', '--format=%an%n%B', branch), /^Ann Person\n[^]*Po-Sandbox: uncommitted work/)
  assert.equal(await git(folder, 'show', `${branch}:notes.txt`), 'note')
  assert.deepEqual(await hostState(folder), before, 'HEAD, index, working tree and hooks untouched')
  const again = await apply([folder, ...home])
  assert.equal(again.code, 0, again.stderr)
  assert.match(again.stdout, /already: the same work, nothing changed/)
  assert.equal(await git(folder, 'rev-parse', branch), applied.tip)

  // The person commits on that branch meanwhile: refused, nothing changes.
  const mine = await git(folder, 'commit-tree', `${branch}^{tree}`, '-p', branch, '-m', 'mine')
  await git(folder, 'update-ref', `refs/heads/${branch}`, mine)
  const diverged = await apply([folder, '--json', ...home])
  assert.equal(diverged.code, 1)
  assert.equal(JSON.parse(diverged.stdout).error.code, 'APPLY_REFUSED')
  assert.match(JSON.parse(diverged.stdout).error.message, /diverged/)
  assert.equal(await git(folder, 'rev-parse', branch), mine)
  assert.deepEqual(await hostState(folder), before)
  const bad = await apply([folder, '--json', '--branch', 'bad..name', ...home])
  assert.equal(bad.code, 1)
  assert.equal(JSON.parse(bad.stdout).error.code, 'OPTIONS_INVALID')
  assert.match(JSON.parse(bad.stdout).error.message, /branch.*bad\.\.name/)
  const current = await apply([folder, '--json', '--branch', 'main', ...home])
  assert.equal(JSON.parse(current.stdout).error.code, 'APPLY_REFUSED')
  assert.match(JSON.parse(current.stdout).error.message, /main is checked out/)
  assert.deepEqual(await hostState(folder), before)

  const patchFile = path.join(path.dirname(folder), 'work.patch')
  const p = await apply([folder, '--json', '--branch', 'agent', '--patch', patchFile, ...home])
  assert.equal(p.code, 0, p.stderr)
  assert.equal(JSON.parse(p.stdout).tip, second, 'the committed work only; the rest as a patch')
  assert.match(readFileSync(patchFile, 'utf8'), /\+\+\+ b\/notes\.txt[^]*\+edited/)
  assert.deepEqual(await hostState(folder), before)
  assert.equal(pids.length, 6)
  const ours = (n) => pids.some((pid) => n.startsWith(`po-sandbox-apply-${pid}-`))
  assert.deepEqual(readdirSync(tmpdir()).filter(ours), [], 'no bundle left behind')
}

test('a git repository in clone mode: its history, the host work git sees, nothing of its config or hooks; nothing planted reaches the host; down keeps the copy, --discard removes it', async (t) => {
  const { folder, poHome, ws } = sandboxFolder(t)
  await hostRepository(folder)
  const hostLog = (await git(folder, 'log', '--all', '--format=%H')).split('\n').sort().join(' ')
  const before = treeHash(folder)
  const home = ['--po-home', poHome]

  const up = await po(['up', folder, '--clone', '--json', ...home, ...IMAGE])
  assert.equal(up.code, 0, up.stderr)
  const c = JSON.parse(up.stdout).container
  const info = JSON.parse(dockerCli(['inspect', c.containerId]))[0]
  const copy = `po-${c.name.slice(3, -(ws.id.length + 1))}-${ws.id}-copy`
  assert.equal(info.Config.Labels['po.workspace-mode'], 'clone')
  assert.equal(c.workspaceMode, 'clone')
  assert.ok(!info.Mounts.some((m) => m.Source === folder), 'the host folder is not mounted')
  assert.ok(info.Mounts.some((m) => m.Type === 'volume' && m.Name === copy && m.Destination === folder && m.RW), JSON.stringify(info.Mounts))
  assert.deepEqual(copiesOf(ws.id), [copy])

  const look = await po(['exec', folder, ...home, '--', 'sh', '-c', LOOK])
  assert.equal(look.code, 0, look.stderr)
  const seen = parseLines(look.stdout)
  assert.equal(seen.log, hostLog, 'the same commits, the same ids')
  assert.equal(seen.branches, 'feature main')
  assert.equal(seen.head, 'main')
  assert.equal(seen.tags, 'v1')
  assert.equal(seen.status, ' M tracked.txt|?? untracked.txt|')
  assert.equal(seen.tracked, 'changed on the host')
  assert.equal(seen.ignored, 'absent')
  assert.equal(seen.guarded, '.vscode .vscode/settings.json', 'untracked .envrc and .vscode/tasks.json stay on the host; the tracked settings come')
  assert.equal(seen.hooks, '', 'none of the host hooks')
  assert.equal(seen.origin, '/dev/null/po-sandbox-copy')
  assert.equal(seen.helper, '')
  assert.equal(seen.user, 'Ann Person <ann@example.invalid>')
  assert.equal(seen.mode, 'clone', '/po-sandbox inside says the session works on a copy')
  const [owners, uid] = seen.owner.split(/\s+(?=\S+$)/)
  assert.equal(owners.trim(), uid, 'the copy is owned by the container user')

  const plant = await po(['exec', folder, ...home, '--', 'sh', '-c', PLANT])
  assert.equal(plant.code, 0, plant.stderr)
  assert.match(plant.stdout, /push-refused/)
  const agentCommit = plant.stdout.trim().split('\n').pop()
  assert.equal(treeHash(folder), before, 'the host folder, .git included, is byte for byte the same')

  const down = await po(['down', folder, ...home])
  assert.equal(down.code, 0, down.stderr)
  assert.deepEqual(copiesOf(ws.id), [copy], 'down keeps the copy')
  const again = await po(['up', folder, '--clone', '--json', ...home, ...IMAGE])
  assert.equal(again.code, 0, again.stderr)
  const adopted = await po(['up', folder, '--clone', '--json', ...home, ...IMAGE])
  assert.equal(JSON.parse(adopted.stdout).container.adopted, true, 'the running copy is adopted as it is')
  const kept = await po(['exec', folder, ...home, '--', 'sh', '-c', 'git rev-parse HEAD; cat Makefile; git status --porcelain'])
  assert.equal(kept.stdout.split('\n')[0], agentCommit, 'the agent work is still there, not copied again')
  assert.match(kept.stdout, /echo planted/)
  await takeTheWork(folder, home, ws, agentCommit)

  // Repository shapes the agent makes in its copy are classed by diff: a nested repository (a
  // gitlink once added) and a folder shaped like a bare repository.
  const shapes = 'mkdir -p shapes/bare/objects/info shapes/bare/refs/heads && echo "ref: refs/heads/main" > shapes/bare/HEAD && : > shapes/bare/objects/info/packs && : > shapes/bare/refs/heads/x && git init -q shapes/sub && git -C shapes/sub -c user.name=a -c user.email=a@b.invalid commit -q --allow-empty -m x'
  const made = await po(['exec', folder, ...home, '--', 'sh', '-c', shapes])
  assert.equal(made.code, 0, made.stderr)
  const shaped = await po(['diff', folder, '--json', ...home])
  assert.equal(shaped.code, 0, shaped.stderr)
  const shapeClasses = Object.fromEntries(JSON.parse(shaped.stdout).uncommitted.files.filter((f) => f.path.startsWith('shapes/')).map((f) => [f.path, f.class ?? null]))
  assert.equal(shapeClasses['shapes/sub'], 'gitlink', JSON.stringify(shapeClasses))
  assert.equal(shapeClasses['shapes/bare/HEAD'], 'bare-repository', JSON.stringify(shapeClasses))

  // A command inside that never ends (a clean filter the agent configured, run by `git add`)
  // does not hold diff or apply: one deadline for all their reading, and nothing on the host.
  const slow = await po(['exec', folder, ...home, '--', 'sh', '-c', 'git config filter.slow.clean "sleep 30; cat" && echo "* filter=slow" > .gitattributes && echo more >> tracked.txt'])
  assert.equal(slow.code, 0, slow.stderr)
  const settled = treeHash(folder)
  for (const verb of ['diff', 'apply']) {
    const late = await po([verb, folder, '--json', ...home], { PO_SANDBOX_CHANGES_TIMEOUT_MS: '1500' })
    assert.equal(late.code, 1, late.stderr)
    const error = JSON.parse(late.stdout).error
    assert.equal(error.code, 'CHANGES_TIMEOUT', late.stdout)
    assert.match(error.message, /longer than 2000 ms \(PO_SANDBOX_CHANGES_TIMEOUT_MS\); nothing was changed on the host/)
  }
  assert.equal(treeHash(folder), settled, 'nothing of a timed-out apply reached the host')

  // Another mode replaces the container, never merges; the copy stays until discarded.
  const bind = await po(['up', folder, '--json', ...home, ...IMAGE])
  assert.equal(bind.code, 0, bind.stderr)
  assert.match(JSON.parse(bind.stdout).container.replacedReason, /was not adopted/)
  assert.equal(JSON.parse(bind.stdout).container.workspaceMode, 'bind')
  const notClone = await po(['diff', folder, '--json', ...home])
  assert.equal(notClone.code, 1)
  assert.equal(JSON.parse(notClone.stdout).error.code, 'NOT_A_CLONE')
  assert.match(JSON.parse(notClone.stdout).error.message, /bind mode.*up --clone/)
  assert.deepEqual(copiesOf(ws.id), [copy])
  const discard = await po(['down', folder, '--discard', ...home])
  assert.equal(discard.code, 0, discard.stderr)
  assert.match(discard.stdout, /copy \(clone mode\) was discarded/)
  assert.deepEqual(copiesOf(ws.id), [])
})

/** What the agent does in a folder copy: modifies, adds, deletes, plants files the host runs, an
 * executable, a link out of the folder, and writes into what .posandboxignore leaves out. */
const FOLDER_WORK = `set -e
printf 'line1\\nchanged\\n' > notes.txt
echo added > added.txt
rm old.txt
echo agent > mine.txt
echo '{"name":"x","scripts":{"postinstall":"echo planted"}}' > package.json
printf 'all:\\n\\techo planted\\n' > Makefile
printf '#!/bin/sh\\necho planted\\n' > tool.sh && chmod +x tool.sh
ln -s /etc/passwd leak
echo 'echo planted' > .envrc
mkdir -p node_modules/z && echo z > node_modules/z/i.js && echo log > new.log
`

/** The files of a folder copy's diff or apply as `path: change outcome class`. */
function outcomes(files) {
  return Object.fromEntries(files.map((f) => [f.path, [f.change, f.outcome, f.class ?? null].join(' ')]))
}

test('a folder without git in clone mode (PO_SANDBOX_WORKSPACE_MODE): copied but what .posandboxignore lists; diff lists the work with its classes; apply writes nothing without --yes, the plain files with it, host-run ones (a guarded .envrc too) with --include-executable, never a link out, never over a host edit, and nothing again', async (t) => {
  const { folder, poHome, ws } = sandboxFolder(t)
  for (const d of ['src', 'node_modules/x', 'target/debug', '.venv/bin', 'web/node_modules/y']) mkdirSync(path.join(folder, d), { recursive: true })
  for (const f of ['src/main.txt', 'node_modules/x/i.js', 'target/debug/app', '.venv/bin/python', 'web/node_modules/y/i.js', 'web/page.html', 'app.log']) writeFileSync(path.join(folder, f), f)
  writeFileSync(path.join(folder, '.posandboxignore'), 'node_modules/\ntarget/\n.venv/\n*.log\n')
  for (const [f, text] of [['notes.txt', 'line1\nline2\n'], ['old.txt', 'old\n'], ['mine.txt', 'base\n'], ['package.json', '{"name":"x"}\n']]) writeFileSync(path.join(folder, f), text)
  symlinkSync('src/main.txt', path.join(folder, 'link'))
  const before = treeHash(folder)
  const env = { PO_SANDBOX_WORKSPACE_MODE: 'clone' }
  const home = ['--po-home', poHome]
  const up = await po(['up', folder, '--json', ...home, ...IMAGE], env)
  assert.equal(up.code, 0, up.stderr)
  const ls = await po(['exec', folder, ...home, '--', 'sh', '-c', `find . | sort | tr '\\n' ' '; readlink link; echo more >> src/main.txt; ${FOLDER_WORK}`], env)
  assert.equal(ls.code, 0, ls.stderr)
  assert.equal(ls.stdout.trim(), '. ./.posandboxignore ./link ./mine.txt ./notes.txt ./old.txt ./package.json ./src ./src/main.txt ./web ./web/page.html src/main.txt')
  assert.equal(treeHash(folder), before)
  assert.equal(copiesOf(ws.id).length, 1)
  writeFileSync(path.join(folder, 'mine.txt'), 'host edit\n')
  const edited = treeHash(folder)

  const d = await po(['diff', folder, '--json', ...home])
  assert.equal(d.code, 0, d.stderr)
  const diff = JSON.parse(d.stdout)
  assert.equal(diff.kind, 'folder')
  assert.equal(diff.base, undefined)
  const dry = {
    '.envrc': 'added held direnv', Makefile: 'added held makefile', 'added.txt': 'added pending ', leak: 'added refused ', 'mine.txt': 'modified conflict ', 'notes.txt': 'modified pending ',
    'old.txt': 'removed pending ', 'package.json': 'modified held package-scripts', 'src/main.txt': 'modified pending ', 'tool.sh': 'added held ',
  }
  assert.deepEqual(outcomes(diff.uncommitted.files), dry)
  assert.match(diff.uncommitted.patch, /--- a\/notes\.txt\n\+\+\+ b\/notes\.txt\n@@ -1,2 \+1,2 @@\n line1\n-line2\n\+changed/)
  assert.match(diff.uncommitted.patch, /# mine\.txt: the host's file changed since the copy was made/)
  assert.match(diff.uncommitted.stat, /10 files changed/)
  assert.equal(treeHash(folder), edited)

  const none = await po(['apply', folder, ...home])
  assert.equal(none.code, 0, none.stderr)
  assert.match(none.stdout, /^Nothing written \(no --yes\): 4 to write or remove with --yes, 4 held back[^]*notes\.txt \(modified\)\s+pending: written with --yes/)
  assert.equal(treeHash(folder), edited, 'without --yes nothing is written')
  const a = await po(['apply', folder, '--yes', '--json', ...home])
  assert.equal(a.code, 0, a.stderr)
  const applied = JSON.parse(a.stdout)
  assert.equal(applied.kind, 'folder')
  assert.equal(applied.changed, true)
  assert.deepEqual(outcomes(applied.files), { ...dry, 'added.txt': 'added written ', 'notes.txt': 'modified written ', 'old.txt': 'removed removed ', 'src/main.txt': 'modified written ' })
  const read = (f) => readFileSync(path.join(folder, f), 'utf8')
  assert.deepEqual([read('notes.txt'), read('added.txt'), read('src/main.txt'), read('mine.txt'), read('package.json')], ['line1\nchanged\n', 'added\n', 'src/main.txtmore\n', 'host edit\n', '{"name":"x"}\n'])
  assert.deepEqual(readdirSync(folder).filter((n) => ['old.txt', 'Makefile', 'tool.sh', 'leak', 'new.log'].includes(n)), [])

  const all = await po(['apply', folder, '--yes', '--include-executable', '--json', ...home])
  assert.equal(all.code, 0, all.stderr)
  const present = { 'added.txt': 'added present ', 'notes.txt': 'modified present ', 'old.txt': 'removed present ', 'src/main.txt': 'modified present ' }
  assert.deepEqual(outcomes(JSON.parse(all.stdout).files), { ...dry, ...present, '.envrc': 'added written direnv', Makefile: 'added written makefile', 'package.json': 'modified written package-scripts', 'tool.sh': 'added written ' })
  assert.equal(read('Makefile'), 'all:\n\techo planted\n')
  assert.ok(statSync(path.join(folder, 'tool.sh')).mode & 0o100, 'the executable stays executable')
  assert.ok(!readdirSync(folder).includes('leak'), 'a link out of the folder is never written')
  assert.equal(read('mine.txt'), 'host edit\n', 'the person\'s edit is kept')
  const applyDone = treeHash(folder)
  const again = await po(['apply', folder, '--yes', '--include-executable', '--json', ...home])
  assert.equal(again.code, 0, again.stderr)
  assert.equal(JSON.parse(again.stdout).changed, false)
  assert.equal(treeHash(folder), applyDone, 'a second apply writes nothing')
  const bad = await po(['apply', folder, '--json', '--branch', 'b', ...home])
  assert.equal(JSON.parse(bad.stdout).error.code, 'OPTIONS_INVALID')
  assert.match(JSON.parse(bad.stdout).error.message, /branch.*folder without git/)
  const wrong = await po(['diff', folder, '--yes'])
  assert.equal(wrong.code, 2)
  assert.match(wrong.stderr, /--yes is an option of apply only/)

  const down = await po(['down', folder, '--discard', ...home])
  assert.equal(down.code, 0, down.stderr)
  assert.deepEqual(copiesOf(ws.id), [])
  assert.deepEqual(readdirSync(path.join(poHome, 'sandbox-copies'), { recursive: true }).filter((n) => n.endsWith('.json')), [], 'the record of the copy goes with it')
})

test('a bad workspace mode is a coded error naming the fix, and nothing is made', async (t) => {
  const poHome = tempHome(t)
  const owner = newOwner()
  const folder = tempDir(t, 'po-clone-bad-')
  const bad = (e) => e.code === 'OPTIONS_INVALID' && /'bind'.*'clone'/.test(e.message)
  assert.throws(() => addon.registerSandboxLayer(fakeHost(), baseOptions(poHome, owner, { workspaceMode: 'copy' })), bad)
  const envBad = baseOptions(poHome, owner, { env: { ...baseOptions(poHome, owner).env, PO_SANDBOX_WORKSPACE_MODE: 'shadow' } })
  assert.throws(() => addon.registerSandboxLayer(fakeHost(), envBad), (e) => bad(e) && e.message.includes('PO_SANDBOX_WORKSPACE_MODE'))
  const entry = { id: 'w', path: folder, mode: 'overlay' }
  assert.throws(() => addon.registerSandboxLayer(fakeHost(), baseOptions(poHome, owner, { workspaces: [entry] })), (e) => bad(e) && e.message.includes('workspaces[].mode'))
  const layer = addon.registerSandboxLayer(fakeHost(), baseOptions(poHome, owner, { oneShot: true }))
  assert.throws(() => layer.containers.start(entry), (e) => bad(e) && e.message.includes('workspace.mode'))
  assert.deepEqual(containersWith({ 'po.owner': owner }), [])
  assert.deepEqual(volumesOf(owner), [])
  for (const args of [['down', folder, '--clone'], ['up', folder, '--discard']]) {
    const r = await po(args)
    assert.equal(r.code, 2, r.stderr)
    assert.match(r.stderr, /is an option of (up|down) only/)
  }
})

test('on a case-insensitive folder (casefold, over FUSE): apply --yes holds .Claude/settings.json, .VSCode/tasks.json and MAKEFILE for --include-executable, and never writes over the person\'s file under another case', async (t) => {
  const folder = await casefoldFolder(t)
  const poHome = tempHome(t)
  const owner = homeOwner(poHome)
  const ws = addon.workspaceForFolder(folder)
  t.after(() => addon.stopSandboxContainers({ poHome, owner, workspace: ws.id, removeVolumes: true, discard: true }))
  mkdirSync(path.join(folder, '.claude'))
  writeFileSync(path.join(folder, '.claude/settings.json'), 'the person\'s\n')
  writeFileSync(path.join(folder, 'notes.txt'), 'notes\n')
  assert.equal(readFileSync(path.join(folder, '.CLAUDE/Settings.JSON'), 'utf8'), 'the person\'s\n', 'the folder is case-insensitive')
  const home = ['--po-home', poHome]
  const up = await po(['up', folder, '--clone', ...home, ...IMAGE])
  assert.equal(up.code, 0, up.stderr)
  const work = await po(['exec', folder, ...home, '--', 'sh', '-c', 'mkdir -p .Claude .VSCode && echo agent > .Claude/settings.json && echo "{}" > .VSCode/tasks.json && printf "all:\\n\\techo planted\\n" > MAKEFILE && echo plain > plain.txt'])
  assert.equal(work.code, 0, work.stderr)
  const byPath = (r) => Object.fromEntries(JSON.parse(r.stdout).files.map((f) => [f.path, f]))

  const a = await po(['apply', folder, '--yes', '--json', ...home])
  assert.equal(a.code, 0, a.stderr)
  const first = byPath(a)
  // Guarded (.VSCode/tasks.json is .vscode's) and host-run (MAKEFILE is a Makefile) names wait.
  for (const p of ['.VSCode/tasks.json', 'MAKEFILE']) assert.equal(first[p]?.outcome, 'held', `${p}: ${JSON.stringify(first[p])}`)
  // The person's .claude/settings.json is the copy's new .Claude/settings.json on this folder.
  assert.equal(first['.Claude/settings.json']?.outcome, 'conflict', JSON.stringify(first['.Claude/settings.json']))
  assert.equal(first['plain.txt'].outcome, 'written')
  assert.ok(!existsSync(path.join(folder, '.vscode/tasks.json')) && !existsSync(path.join(folder, 'makefile')), 'nothing host-run was written with --yes alone')

  const b = await po(['apply', folder, '--yes', '--include-executable', '--json', ...home])
  assert.equal(b.code, 0, b.stderr)
  const second = byPath(b)
  assert.equal(second['.VSCode/tasks.json'].outcome, 'written')
  assert.equal(second.MAKEFILE.outcome, 'written')
  assert.equal(readFileSync(path.join(folder, '.vscode/TASKS.json'), 'utf8'), '{}\n')
  assert.equal(readFileSync(path.join(folder, 'Makefile'), 'utf8'), 'all:\n\techo planted\n')
  assert.equal(second['.Claude/settings.json'].outcome, 'conflict', JSON.stringify(second['.Claude/settings.json']))
  assert.equal(readFileSync(path.join(folder, '.claude/settings.json'), 'utf8'), 'the person\'s\n', 'the person\'s file under another case is kept')
})

test('bind mode on a case-insensitive folder is refused with the fix and nothing is made; accepted, the guards hold for their own case only', async (t) => {
  const folder = await casefoldFolder(t)
  const poHome = tempHome(t)
  const owner = homeOwner(poHome)
  const ws = addon.workspaceForFolder(folder)
  t.after(() => addon.stopSandboxContainers({ poHome, owner, workspace: ws.id, removeVolumes: true }))
  writeFileSync(path.join(folder, 'notes.txt'), 'notes\n')
  mkdirSync(path.join(folder, '.claude'))
  writeFileSync(path.join(folder, '.claude/settings.json'), '{}\n')
  const home = ['--po-home', poHome]
  const refused = await po(['up', folder, '--json', ...home, ...IMAGE])
  assert.equal(refused.code, 1, refused.stderr)
  const error = JSON.parse(refused.stdout).error
  assert.equal(error.code, 'WORKSPACE_INVALID', refused.stdout)
  assert.match(error.message, /case-insensitive file system.*up --clone.*PO_SANDBOX_CASE_INSENSITIVE_BIND=accept/)
  assert.deepEqual(readdirSync(folder).sort(), ['.claude', 'notes.txt'], 'no placeholder, no probe left')
  assert.deepEqual(containersWith({ 'po.workspace': ws.id }), [])

  // Accepted: the container comes up, and a guarded folder is writable under another case.
  const accepted = await po(['up', folder, ...home, ...IMAGE], { PO_SANDBOX_CASE_INSENSITIVE_BIND: 'accept' })
  assert.equal(accepted.code, 0, accepted.stderr)
  const write = await po(['exec', folder, ...home, '--', 'sh', '-c', 'echo x > .claude/settings.json 2>/dev/null && echo guarded-open || echo guarded-held; echo planted > .CLAUDE/settings.json 2>/dev/null && echo variant-open || echo variant-held'])
  assert.equal(write.code, 0, write.stderr)
  assert.match(write.stdout, /guarded-held/)
  assert.match(write.stdout, /variant-open/, 'the reason bind mode is refused here: another case passes the guard')
  assert.equal(readFileSync(path.join(folder, '.claude/settings.json'), 'utf8'), 'planted\n')
  const down = await po(['down', folder, ...home])
  assert.equal(down.code, 0, down.stderr)
})
