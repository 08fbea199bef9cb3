// `servegate demo` in a clone: the regression the gates must catch, into evidence-regression/.
import { defineConfig } from 'vitest/config'
import { servegate } from '../../src/vitest/index.ts'

export default defineConfig({
  plugins: [servegate({ evidenceDir: 'evidence-regression', benchInclude: ['benchmarks/demo/regression.demo.ts'] })],
})
