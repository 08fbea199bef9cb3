/**
 * The simulated engine as a bench server (child process): `servegate sim`'s flags, then
 * `listening <port>` on stdout; it stops on SIGTERM or SIGINT, or when its parent goes away
 * (stdin closes), so no server outlives the bench.
 *
 * Usage: `node benchmarks/servers/sim.ts [servegate sim flags…]` (the port defaults to 0 here)
 */
import { parseSimArgs } from '../../src/cli/sim.ts'
import { startSimServer } from '../../src/sim/server.ts'

const options = parseSimArgs(['--port', '0', ...process.argv.slice(2)])
if (options === 'help') process.exit(2)
const sim = await startSimServer(options)
process.stdout.write(`listening ${sim.port}\n`)
let stopping = false
const stop = (): void => {
  if (stopping) return
  stopping = true
  process.stdin.destroy()
  void sim.close().then(() => process.exit(0))
}
process.on('SIGTERM', stop)
process.on('SIGINT', stop)
process.stdin.on('end', stop)
process.stdin.on('close', stop)
process.stdin.resume()
