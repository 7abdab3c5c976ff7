// The course's JupyterLab extension: the deadline next to each assignment in nbgrader's Assignment List
// (@jupyter/nbgrader renders the /assignments JSON and has no column for it), and beside each submission whether
// it was on time ("late by 2 h 10 min: the late penalty applies"), in the student's language.  The data is the
// course's exchange List's (rlhf_course/exchange/fetch.py: "deadline" per assignment, "lateness" per submission);
// this only shows it, and under a fetched edition's Submit button what submitting it would replace ("replaces": the
// other edition's newer submission, in the sentence submit warns with).  Before anything is released it says so in
// the released list, in the student's language (the sentence is rlhf_course/exchange/local.py's NOTHING_RELEASED
// and its translation in rlhf_course/i18n.py: a test keeps them equal).  And what a wait is waiting for: while nbgrader's Validate runs (its button says
// "Validating...", in the notebook's toolbar or the Assignment List), the course's Validate says beside the button
// what it is doing (rlhf_course/classroom/validate_extension.py: /rlhf-course/validate-status); while a notebook's
// kernel is still starting after a few seconds, its toolbar says the class is busy.  Those sentences come from the
// server in both languages (rlhf_course/i18n.py).  And two open notebooks of one name (an assignment's editions)
// show their folders in their tabs.  And an untouched notebook does not say it has unsaved changes when its kernel
// connects (the kernel's metadata is not the student's change).  And Fetch Feedback with nothing to fetch says why in
// a dialog, and Validate's dialog heads each cell grading takes from the release with what grading takes, in the
// edition's language.  Built with `npm run build`
// (jupyter/labextension/README.md); the build is committed.
import { Dialog, showDialog } from '@jupyterlab/apputils';
import { PageConfig, URLExt } from '@jupyterlab/coreutils';
import { INotebookTracker } from '@jupyterlab/notebook';
import { ServerConnection } from '@jupyterlab/services';
import { ITranslator } from '@jupyterlab/translation';

const LISTS = {  // each list of the Assignment List, and the status of what it lists
  released_assignments_list: 'released', fetched_assignments_list: 'fetched', submitted_assignments_list: 'submitted'
};
const MARK = 'rlhf-deadline';
const REPLACES = 'rlhf-replaces';
const NOTHING = 'rlhf-nothing-released';
const NOTHING_RELEASED = {
  'en': 'Nothing has been released yet: the Assignment List stays empty until an assignment is released ' +
    '(in the course folder: make release, then nbgrader release_assignment NAME).',
  'zh-CN': '还没有发布任何作业：发布作业之前，作业列表（Assignment List）是空的' +
    '（在课程目录中运行 make release，再运行 nbgrader release_assignment 作业名）。'
};

async function answer(path) {
  const settings = ServerConnection.makeSettings();
  const response = await ServerConnection.makeRequest(URLExt.join(PageConfig.getBaseUrl(), path), {}, settings);
  return response.json();
}

async function listed(courseId) {
  const body = await answer('assignments?course_id=' + encodeURIComponent(courseId));
  return body.success ? body.value : [];
}

async function sayWhetherAnythingIsReleased(language) {
  const placeholder = document.getElementById('released_assignments_list_placeholder');
  if (!placeholder) {
    return;
  }
  const stock = placeholder.querySelector(':scope > div:not(.' + NOTHING + ')');
  let note = placeholder.querySelector(':scope > .' + NOTHING);
  let nothing = false;
  if (!placeholder.hidden) {  // nothing to fetch: because nothing is released (a course may list submissions only)
    const courses = await answer('courses');
    nothing = courses.success;
    for (const course of courses.success ? courses.value : []) {
      if ((await listed(course)).some(info => info.status === 'released' || info.status === 'fetched')) {
        nothing = false;
        break;
      }
    }
  }
  if (!nothing) {
    if (note) {
      note.remove();
    }
    if (stock) {
      stock.hidden = false;
    }
    return;
  }
  if (!note) {
    note = document.createElement('div');
    note.classList.add(NOTHING);
    placeholder.append(note);
  }
  note.textContent = NOTHING_RELEASED[language] || NOTHING_RELEASED.en;
  if (stock) {
    stock.hidden = true;  // nbgrader's "There are no assignments to fetch.": the sentence above says more
  }
}

function textOf(row, selector) {
  const found = row.querySelector(':scope > div > ' + selector) || row.querySelector(selector);
  return found ? found.textContent.trim() : '';
}

function annotate(row, text, late) {
  const name = row.querySelector('.item_name');
  if (!name || !text) {
    return;
  }
  let span = name.querySelector(':scope > .' + MARK);
  if (!span) {
    span = document.createElement('span');
    span.classList.add(MARK);
    name.append(span);
  }
  span.textContent = ' (' + text + ')';  // textContent: never markup, whatever the data says
  span.classList.toggle(MARK + '-late', Boolean(late));
}

// Under a fetched edition's Submit button: what submitting it now would replace ("This replaces your rlhf submission of
// ... (and any manual grade on it) ..."), the sentence submit warns with, or nothing.
function sayWhatSubmitReplaces(row, text) {
  const line = row.querySelector(':scope > .col-md-12') || row;
  let note = line.querySelector(':scope > .' + REPLACES);
  if (!text) {
    if (note) {
      note.remove();
    }
    return;
  }
  if (!note) {
    note = document.createElement('div');
    note.classList.add(REPLACES);
    line.append(note);
  }
  note.textContent = text;  // textContent: never markup
}

async function show(language) {
  await sayWhetherAnythingIsReleased(language);
  const rows = [];  // [row, the status its list shows]
  for (const [id, status] of Object.entries(LISTS)) {
    const list = document.getElementById(id);
    if (list) {
      rows.push(...[...list.querySelectorAll(':scope > .list_item')].map(row => [row, status]));
    }
  }
  const courses = new Set(rows.map(([row]) => textOf(row, '.item_course')).filter(Boolean));
  const infos = [];
  for (const course of courses) {
    infos.push(...(await listed(course)));
  }
  const pick = text => (text ? text[language] || text.en : '');
  for (const [row, status] of rows) {
    const assignment = row.querySelector('.item_name');
    const assignmentId = assignment ? (assignment.firstChild ? assignment.firstChild.textContent.trim() : '') : '';
    const courseId = textOf(row, '.item_course');
    const info = infos.find(i => i.assignment_id === assignmentId && i.course_id === courseId &&
      i.status === status);
    if (status === 'fetched') {
      sayWhatSubmitReplaces(row, info && info.replaces ? pick(info.replaces.text) : '');
    }
    if (!info || !info.deadline || !info.deadline.due) {  // a course without due dates says nothing of them
      continue;
    }
    annotate(row, pick(info.deadline.text), false);
    for (const nested of row.querySelectorAll('.nested_list_item')) {
      const name = nested.querySelector('.item_name');
      const stamp = name && name.firstChild ? name.firstChild.textContent.trim() : '';
      const submission = (info.submissions || []).find(s => s.timestamp === stamp);
      if (submission && submission.lateness) {
        annotate(nested, pick(submission.lateness.text), submission.lateness.seconds_late > 0);
      }
    }
  }
}

const plugin = {
  id: 'rlhf-course-deadlines:plugin',
  description: 'Deadlines and lateness in nbgrader\'s Assignment List.',
  autoStart: true,
  optional: [ITranslator],
  activate: (app, translator) => {
    const code = translator ? translator.languageCode || 'en' : 'en';
    const language = code.toLowerCase().startsWith('zh') ? 'zh-CN' : 'en';
    let pending = null;
    let busy = false;
    const schedule = () => {
      if (pending !== null) {
        return;
      }
      pending = setTimeout(async () => {
        pending = null;
        if (busy) {
          schedule();
          return;
        }
        busy = true;
        try {
          await show(language);
        } catch (error) {
          console.warn('rlhf-course-deadlines:', error);
        } finally {
          busy = false;
        }
      }, 150);
    };
    // The Assignment List redraws its rows after every list, fetch and submit: show the deadlines again then
    // (rows it drew, not the spans added here, set it off).
    // The released list's placeholder shown or hidden (an empty list loaded, or rows arrived): say again whether
    // anything is released.
    new MutationObserver(records => {
      const redrawn = records.some(r => [...r.addedNodes].some(n => n.nodeType === 1 && n.classList &&
        n.classList.contains('list_item')) ||
        (r.type === 'attributes' && r.target.id === 'released_assignments_list_placeholder'));
      if (redrawn) {
        schedule();
      }
    }).observe(document.body, { childList: true, subtree: true, attributes: true, attributeFilter: ['hidden'] });
  }
};

const WAIT = 'rlhf-wait';
const VALIDATE_NOTE = 'rlhf-wait-validate';
const KERNEL_NOTE = 'rlhf-wait-kernel';
const VALIDATE_POLL_MS = 2000;  // how often the status of a running Validate is asked for
const KERNEL_QUIET_MS = 5000;  // a kernel start shorter than this says nothing
const STARTING = ['starting', 'initializing', 'restarting', 'connecting'];

async function getJSON(path) {
  const settings = ServerConnection.makeSettings();
  const response = await ServerConnection.makeRequest(URLExt.join(PageConfig.getBaseUrl(), path), {}, settings);
  return response.ok ? response.json() : null;
}

function say(where, kind, text, after = false) {  // a note of ``kind``: at the end of ``where`` (or right after it)
  const found = after ? where.nextElementSibling : where.querySelector(':scope > .' + kind);
  let note = found && found.classList.contains(kind) ? found : null;
  if (!note) {
    if (!text) {
      return;
    }
    note = document.createElement('span');
    note.classList.add(WAIT, kind);
    after ? where.after(note) : where.append(note);
  }
  note.textContent = text;  // textContent: never markup
  note.hidden = !text;
}

function validating() {  // nbgrader's Validate buttons whose request runs: [where the note goes, after it?]
  const toolbar = [...document.querySelectorAll('.validate-button .jp-ToolbarButtonComponent-label')]
    .filter(label => label.textContent.trim() === 'Validating...')
    .map(label => [label.closest('.jp-Toolbar'), false]);  // at the toolbar's end: a button's own box is narrow
  const list = [...document.querySelectorAll('.item_status > button')]
    .filter(button => button.textContent.trim() === 'Validating...')
    .map(button => [button, true]);  // the Assignment List: right after the notebook's button
  return [...toolbar, ...list].filter(([where]) => where);
}

const waits = {
  id: 'rlhf-course-deadlines:waits',
  description: 'What Validate and a starting kernel are waiting for, beside them.',
  autoStart: true,
  optional: [ITranslator, INotebookTracker],
  activate: (app, translator, tracker) => {
    const code = translator ? translator.languageCode || 'en' : 'en';
    const language = code.toLowerCase().startsWith('zh') ? 'zh-CN' : 'en';
    const pick = text => (text ? text[language] || text.en : '');
    let messages = null;
    const message = async key => {
      messages = messages || (await getJSON('rlhf-course/messages')) || {};
      return pick(messages[key]);
    };
    let shown = [];  // where a Validate's status is written: [element, after it?]
    setInterval(async () => {
      const running = validating();
      for (const [where, after] of shown.filter(([w]) => !running.some(([r]) => r === w))) {
        say(where, VALIDATE_NOTE, '', after);
      }
      shown = running;
      if (running.length) {
        try {
          const status = await getJSON('rlhf-course/validate-status');
          for (const [where, after] of running) {
            say(where, VALIDATE_NOTE, status && status.busy ? pick(status.text) : '', after);
          }
        } catch (error) {
          console.warn('rlhf-course-deadlines:', error);
        }
      }
    }, VALIDATE_POLL_MS);
    if (tracker) {
      tracker.widgetAdded.connect((_, panel) => {
        let timer = null;
        const update = () => {
          const starting = STARTING.includes(panel.sessionContext.kernelDisplayStatus);
          if (starting && timer === null) {
            timer = setTimeout(async () => {
              if (STARTING.includes(panel.sessionContext.kernelDisplayStatus)) {
                say(panel.toolbar.node, KERNEL_NOTE, await message('kernel_starting'));
              }
            }, KERNEL_QUIET_MS);
          } else if (!starting) {
            clearTimeout(timer);
            timer = null;
            say(panel.toolbar.node, KERNEL_NOTE, '');
          }
        };
        panel.sessionContext.statusChanged.connect(update);
        panel.sessionContext.connectionStatusChanged.connect(update);
        update();
      });
    }
  }
};

// Two open notebooks of one name (an assignment's editions: rlhf/rlhf_building_blocks.ipynb and
// rlhf_zh/rlhf_building_blocks.ipynb) read the same in their tabs: each such tab also shows its folder, before the
// name (a narrow tab cuts the label's end).  Not through the tab's label: a document widget takes a new label for a
// rename of its file.  The folder goes in the title's dataset (the tab's data-rlhffolder attribute), and a rule per
// folder shown puts it before the label (the tab's own ::before and ::after are JupyterLab's).
const FOLDER = 'rlhffolder';
const FOLDER_STYLE = 'rlhf-tab-folders';

function cssString(text) {  // a CSS string holding ``text``, whatever it holds
  return '"' + [...text].map(c => (/[\w ./-]/.test(c) ? c : '\\' + c.codePointAt(0).toString(16) + ' ')).join('') +
    '"';
}

function showFolders(folders) {  // one rule per folder shown: before the label of the tabs naming it
  let style = document.getElementById(FOLDER_STYLE);
  if (!style) {
    style = document.createElement('style');
    style.id = FOLDER_STYLE;
    document.head.append(style);
  }
  style.textContent = [...new Set(folders)].map(folder =>
    `.lm-TabBar-tab[data-${FOLDER}=${cssString(folder)}] > .lm-TabBar-tabLabel::before ` +
    `{ content: ${cssString(folder + '/')}; }`).join('\n');
}

function folderShown(path, others) {  // the folder a tab shows ('' when its file name is its own)
  const slash = path.lastIndexOf('/');
  const name = path.slice(slash + 1);
  const shared = others.some(other => other !== path && other.slice(other.lastIndexOf('/') + 1) === name);
  return shared && slash > 0 ? path.slice(0, slash) : '';
}

const tabs = {
  id: 'rlhf-course-deadlines:tabs',
  description: 'Notebooks of one name show their folders in their tabs.',
  autoStart: true,
  optional: [INotebookTracker],
  activate: (app, tracker) => {
    if (!tracker) {
      return;
    }
    const refresh = () => {
      const panels = [];
      tracker.forEach(panel => panels.push(panel));
      const paths = panels.map(panel => panel.context.localPath);
      const shown = [];
      for (const panel of panels) {
        const folder = folderShown(panel.context.localPath, paths);
        if (folder) {
          shown.push(folder);
        }
        if ((panel.title.dataset[FOLDER] || '') !== folder) {
          const dataset = { ...panel.title.dataset };
          if (folder) {
            dataset[FOLDER] = folder;
          } else {
            delete dataset[FOLDER];
          }
          panel.title.dataset = dataset;
        }
      }
      showFolders(shown);
    };
    tracker.widgetAdded.connect((_, panel) => {
      panel.context.pathChanged.connect(refresh);
      panel.disposed.connect(() => setTimeout(refresh));  // once the tracker has let it go
      refresh();
    });
  }
};

// When a kernel connects, JupyterLab writes its language_info (and kernelspec) into the notebook's metadata, and
// the release carries only {"name": "python"} there (the course does not pin Python to the patch): the model
// differs from the file, and the tab shows unsaved changes the student never made (closing it asks them to save).
// So when a notebook turns dirty and all that differs from what was last loaded or saved is that metadata, it is
// clean again.  Anything else that differs (a cell typed, run, added, an output, other metadata) keeps the mark: a
// student's change never loses its dot or its save prompt.
const KERNEL_WRITTEN = ['language_info', 'kernelspec'];

function canonical(value) {  // JSON with sorted keys: key order is no part of a notebook's content
  return JSON.stringify(value, (key, item) => (item && typeof item === 'object' && !Array.isArray(item)
    ? Object.fromEntries(Object.keys(item).sort().map(name => [name, item[name]])) : item));
}

function withoutKernelMetadata(model) {  // the notebook, but for what a kernel's connection writes
  const notebook = model.toJSON();
  const metadata = { ...notebook.metadata };
  for (const key of KERNEL_WRITTEN) {
    delete metadata[key];
  }
  return canonical({ ...notebook, metadata });
}

const cleanOpen = {
  id: 'rlhf-course-deadlines:clean-open',
  description: 'A notebook whose only change is the metadata its kernel wrote is not marked as changed.',
  autoStart: true,
  optional: [INotebookTracker],
  activate: (app, tracker) => {
    if (!tracker) {
      return;
    }
    tracker.widgetAdded.connect((_, panel) => {
      const context = panel.context;
      let clean = null;  // the notebook as last loaded or saved, without its kernel metadata
      const remember = () => {
        if (context.model && !context.model.dirty) {
          clean = withoutKernelMetadata(context.model);
        }
      };
      const onlyKernelMetadataChanged = () => clean !== null && context.model.dirty &&
        withoutKernelMetadata(context.model) === clean;
      context.ready.then(() => {
        remember();
        context.model.stateChanged.connect((model, change) => {
          if (change.name !== 'dirty') {
            return;
          }
          if (!change.newValue) {
            remember();  // loaded, reverted or saved
          } else if (onlyKernelMetadataChanged()) {
            // after the dirty state's own transaction and before the tab is drawn again
            queueMicrotask(() => {
              if (onlyKernelMetadataChanged()) {
                model.dirty = false;
              }
            });
          }
        });
      }).catch(() => undefined);  // a notebook that fails to load says so itself
    });
  }
};

// nbgrader's labextension shows what the server answers to its POSTs, and the course's server adds to two answers what
// nbgrader's would not say.  Both are read where they arrive: nbgrader's requests go through the page's fetch, which
// this wraps once (every other request passes through untouched).
//
// Fetch Feedback redraws the list from the answer and shows nothing else, so a fetch with nothing to fetch looked
// like one that worked.  The course's server adds "notice" ({title, text}) to that answer when there was nothing, or
// only an earlier submission's feedback, to fetch (rlhf_course/classroom/submit_refusal.py, the sentence
// rlhf_course/exchange/fetch.py's, in the edition's language); it is shown here in a dialog.
//
// Validate shows each cell grading takes from the release (the course's notice, rlhf_course/classroom/
// patient_validate.py) as nbgrader shows a changed cell: under its own English line "The source of the following
// cell has changed, but it should not have!", false of a deleted cell and of an answer cell whose text is graded.
// The course's server adds "taken_from_release" to that answer, a true heading for each notice in the edition's
// language (rlhf_course/classroom/validate_extension.py); once nbgrader's dialog is open, each of its lines is
// replaced by its heading, as text.  For an edition in another language than English it also adds "nbgrader_lines",
// nbgrader's own English title and lines of that dialog ("Validation Results", "The following cell failed:", ...) in
// the edition's language: each is put in place of nbgrader's, as text.
const FETCH_FEEDBACK = '/assignments/fetch_feedback';
const VALIDATE = '/assignments/validate';
const NBGRADER_CHANGED = 'The source of the following cell has changed, but it should not have!';
const TAKEN_FROM_RELEASE = 'taken_from_release';
const TAKEN_CLASS = 'rlhf-taken-from-release';
const NBGRADER_LINES = 'nbgrader_lines';
const DIALOG_WAIT_MS = 10000;  // how long after the answer nbgrader's dialog is looked for

function postedTo(request, init) {  // the path a request POSTs to, or '' for any other request
  const url = typeof request === 'string' || request instanceof URL ? String(request) : request.url;
  const method = (init && init.method) || (typeof request === 'object' && request.method) || 'GET';
  return method.toUpperCase() === 'POST' ? new URL(url, window.location.href).pathname : '';
}

function sayWhyNothingWasFetched(answer) {
  if (answer && answer.notice && answer.notice.text) {
    showDialog({  // a string body is shown as text, never markup
      title: String(answer.notice.title || ''), body: String(answer.notice.text), buttons: [Dialog.okButton()]
    });
  }
}

// nbgrader's Validate dialog lists changed cells in #validation-message.validation-changed: per cell, a <div> holding
// its line in a <p>, then the notice in a <pre>.  Its lines become the headings, in order; false when the dialog is
// not (yet) there or does not list one line per heading.
function headCellsTakenFromRelease(headings) {
  const message = document.querySelector('.jp-Dialog #validation-message.validation-changed');
  const lines = message ? [...message.querySelectorAll(':scope > div > p')] : [];
  if (!lines.length || lines.length !== headings.length || lines.some(p => p.textContent !== NBGRADER_CHANGED)) {
    return false;
  }
  lines.forEach((line, i) => {
    line.textContent = String(headings[i]);  // textContent: never markup
  });
  message.classList.add(TAKEN_CLASS);  // its notices are sentences: wrapped inside the dialog, not cut at its edge
  return true;
}

// nbgrader's own title and lines of its open Validate dialog, each replaced by the edition's words for it (``lines``:
// {English: the edition's}); false when the dialog or its title is not (yet) there.
function sayNbgraderLinesInTheEditionsLanguage(lines) {
  const message = document.querySelector('.jp-Dialog #validation-message');
  const dialog = message ? message.closest('.jp-Dialog') : null;
  if (!dialog) {
    return false;
  }
  // the title: a text node of the header (JupyterLab's string title), or an element of it without children; React
  // draws it after the dialog is in the page, so until it shows there is nothing to replace yet
  const header = dialog.querySelector('.jp-Dialog-header');
  if (!header || !header.textContent.trim()) {
    return false;
  }
  const title = [...header.childNodes, ...header.querySelectorAll('*')].filter(node =>
    node.nodeType === Node.TEXT_NODE || (node.nodeType === Node.ELEMENT_NODE && !node.children.length));
  for (const node of [...title, ...message.querySelectorAll(':scope > div > p')]) {
    const said = lines[node.textContent.trim()];
    if (typeof said === 'string' && said) {
      node.textContent = said;  // textContent: never markup
    }
  }
  return true;
}

function sayWhatValidateFound(answer) {
  const headings = answer && answer[TAKEN_FROM_RELEASE];
  const lines = answer && answer[NBGRADER_LINES];
  const steps = [];  // what is still to do once nbgrader's dialog is open, each true when done
  if (Array.isArray(headings) && headings.length) {
    steps.push(() => headCellsTakenFromRelease(headings));
  }
  if (lines && typeof lines === 'object') {  // after the headings: they find nbgrader's English line
    steps.push(() => sayNbgraderLinesInTheEditionsLanguage(lines));
  }
  const rest = () => {
    while (steps.length && steps[0]()) {
      steps.shift();
    }
    return !steps.length;
  };
  if (rest()) {
    return;
  }
  // nbgrader opens its dialog once it has read the same answer: before or after this
  const observer = new MutationObserver(() => {
    if (rest()) {
      observer.disconnect();
    }
  });
  observer.observe(document.body, { childList: true, subtree: true });
  setTimeout(() => observer.disconnect(), DIALOG_WAIT_MS);
}

const ANSWER_READERS = { [FETCH_FEEDBACK]: sayWhyNothingWasFetched, [VALIDATE]: sayWhatValidateFound };

const answers = {
  id: 'rlhf-course-deadlines:answers',
  description: 'Fetch Feedback with nothing to fetch says why; Validate heads cells taken from the release truly, ' +
    'and in the edition\'s language.',
  autoStart: true,
  activate: () => {
    const pageFetch = window.fetch;
    window.fetch = async (request, init) => {
      const response = await pageFetch.call(window, request, init);
      const path = postedTo(request, init);
      const reader = Object.entries(ANSWER_READERS).find(([ending]) => path.endsWith(ending));
      if (reader) {
        response.clone().json().then(reader[1]).catch(error => console.warn('rlhf-course-deadlines:', error));
      }
      return response;
    };
  }
};

export default [plugin, waits, tabs, cleanOpen, answers];
