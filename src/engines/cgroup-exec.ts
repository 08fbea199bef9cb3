/**
 * Runs an engine inside its launch's cgroup: joins the cgroup, then replaces itself with the
 * engine (execve keeps the pid, the environment and the standard streams), so the engine and
 * everything it ever forks start inside it. Node cannot spawn a child straight into a cgroup
 * (that needs clone3's CLONE_INTO_CGROUP), and moving the pid in after the spawn races with the
 * engine's first forks; this process forks nothing before it joins.
 *
 * Usage: node cgroup-exec.js CGROUP_DIR EXECUTABLE ARGV0 [ARG…]
 */
import { writeFileSync } from 'node:fs'
import { join } from 'node:path'

const [dir, executable, ...argv] = process.argv.slice(2)
try {
  // "0" moves the writing process itself.
  writeFileSync(join(dir as string, 'cgroup.procs'), '0')
} catch (error) {
  const code = (error as NodeJS.ErrnoException).code ?? (error as Error).message
  process.stderr.write(`servegate: could not join the launch's cgroup ${dir} (${code}); teardown hunts by process tree, token and port\n`)
}
if (process.execve === undefined) {
  process.stderr.write(`servegate: cannot run ${executable}: Node ${process.version} has no process.execve\n`)
  process.exit(127)
}
try {
  process.execve(executable as string, argv, process.env)
} catch (error) {
  process.stderr.write(`servegate: cannot run ${executable}: ${(error as Error).message}\n`)
  process.exit(127)
}
