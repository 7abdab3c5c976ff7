// After a build: the SHA-256 of the extension's sources (SOURCES, in order) beside the build, so a test
// (tests/exchange/test_deadlines_in_the_exchange.py) fails when the committed build is older than its source.
const crypto = require('crypto');
const fs = require('fs');
const SOURCES = ['package.json', 'src/index.js', 'style/index.css'];
const hash = crypto.createHash('sha256');
for (const name of SOURCES) {
  hash.update(name + '\0');
  hash.update(fs.readFileSync(name));
  hash.update('\0');
}
fs.writeFileSync('rlhf-course-deadlines/source-sha256.txt', hash.digest('hex') + '\n');
