/* stage.h — the stage interface: export, infer-shapes, preprocess, quantize,
 * verify. Each stage declares its rule keys (used to validate rule files and
 * to build the canonical part of the action key) and a run function that
 * reads its input model(s) and writes its outputs into a fresh directory.
 *
 * Stages run in a child process (src/build.c), so a crash or a Ctrl-C never
 * leaves partial outputs: only a complete output directory is stored. */
#ifndef QM_STAGES_STAGE_H
#define QM_STAGES_STAGE_H

#include <stdio.h>

#include "util.h"

struct Section;

enum { PARAM_TEXT, PARAM_ENUM, PARAM_INT, PARAM_FLOAT, PARAM_BOOL, PARAM_LIST };

typedef struct StageParam {
	const char *key;      /* rule key, e.g. "infer-shapes", "export.deps" */
	int kind;             /* PARAM_* */
	const char *values;   /* PARAM_ENUM: allowed values separated by '|' */
	const char *dflt;     /* default value, or NULL for none */
	int in_key;           /* part of the action key (0: e.g. purely cosmetic) */
	const char *help;     /* one line, for the man page and errors */
} StageParam;

typedef struct StageCtx {
	const char *model;        /* model name */
	const char *root;         /* project root: the stage's working directory */
	const struct Section *sec;/* the model's (inherited) section */
	const char *input;        /* input model file, or NULL (export) */
	const char *reference;    /* float reference model (verify), or NULL */
	const char *side;         /* directory holding the outputs but the
				     model of the stage's side_of stage
				     (quantize, verify: calibrate's
				     calibration.stats), or NULL */
	const char *outdir;       /* write every output file here */
	const char *output;       /* outdir/<model>.onnx: the main output */
	PtrVec *deps;             /* discovered input files (project-relative
				     paths, malloc'd) the stage read */
	FILE *log;                /* progress and warnings (captured) */
	int threads;              /* threads the stage may use (>= 1) */
} StageCtx;

typedef struct Stage {
	const char *name;
	int version;              /* bump when the output for the same inputs changes */
	const StageParam *params; /* terminated by {NULL} */
	/* does this model run the stage? (given the model's section) */
	int (*wanted)(const struct Section *sec);
	/* files the stage reads besides its input model, project-relative,
	 * appended to files (hashed into the key); may be NULL */
	int (*declared_inputs)(const struct Section *sec, const char *root, PtrVec *files);
	int (*run)(StageCtx *c);  /* 0 or -1 after error() */
	/* when set, the stage also receives a reference model: the input of
	 * this other stage of the same model (verify compares the quantized
	 * model against the float model that quantize started from) */
	const char *reference_of;
	/* when set, the stage also receives the outputs of this other stage
	 * of the same model, if the model runs it, in StageCtx.side (quantize
	 * and verify: calibrate's statistics) */
	const char *side_of;
	/* the stage's outputs reach later stages only through their side_of:
	 * the stage after it takes its model from the stage before it
	 * (calibrate: quantize quantizes the model calibrate started from) */
	int off_chain;
	/* the stage only adds annotations to its model (infer-shapes: the
	 * type and shape of every tensor): an off_chain stage right after it,
	 * which does not read them, takes its model from before it, and the
	 * two run at the same time */
	int annotates;
	/* extra validation of one of the stage's keys when the rule file is
	 * read (the kind checks are done already): 0, or -1 with error()
	 * saying what was expected. May be NULL. */
	int (*check_param)(const char *key, const char *value);
	/* checks of a model's keys together (a combination that cannot work)
	 * when the rule files are read, for a model the stage is wanted by:
	 * 0, or -1 with error() "file:line: model 'M': ...". May be NULL. */
	int (*check_section)(const struct Section *sec);
	/* appends to the action key what the stage's output depends on
	 * besides its own keys (calibrate: whether the statistics need
	 * histograms, which quantize.method implies). May be NULL. */
	void (*key_extra)(const struct Section *sec, StrBuf *key);
	/* may the stage, for this model, write files of the project besides
	 * its outputs (export's command)? Then the declared inputs of later
	 * stages are hashed again when their keys are made. May be NULL. */
	int (*writes_project)(const struct Section *sec);
} Stage;

/* all stages in pipeline order, NULL-terminated */
extern const Stage *const stage_table[];

/* the stage called name, or NULL */
const Stage *stage_find(const char *name);
/* the declaring stage and param of a model key, or NULL */
const StageParam *stage_param_find(const char *key, const Stage **stage);
/* effective value of key for a model: its own or the default (NULL if none) */
const char *stage_param_value(const struct Section *sec, const char *key);
/* check value against the param; 0, or -1 with error() describing what was expected */
int stage_param_check(const StageParam *p, const char *value);

/* Expand a sample list key (files, directories, globs; a directory gives its
 * files and those of its test_data_set_* subdirectories) into
 * project-relative files appended to files. Errors name the key's file:line:
 * a spec leaving the project, or one matching no file (empty_hint is
 * appended to that message, may be ""). */
int stage_expand_samples(const struct Section *sec, const char *key, const char *root,
			 const char *empty_hint, PtrVec *files);

/* the individual stages */
/* the statistics of the model's calibrate stage (StageCtx.side) into *out;
 * -1 after error() saying that stage_name needs them */
struct CalibStats;
int calibrate_stats_load(const StageCtx *c, const char *stage_name, struct CalibStats **out);

extern const Stage stage_export;
extern const Stage stage_infer_shapes;
extern const Stage stage_preprocess;
extern const Stage stage_calibrate, stage_quantize;
extern const Stage stage_verify;

#endif
