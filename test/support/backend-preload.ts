/** `bun test --preload`: under RELAY_TEST_BACKEND=postgres, the server and its template start before any test. */
import { ON_POSTGRES, preparePostgres } from './backend.ts'

if (ON_POSTGRES) await preparePostgres()
